from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh.llm.sse import SseParser


def events(lines: list[str]) -> list[str]:
    parser = SseParser()
    out = [data for line in lines if (data := parser.feed(line)) is not None]
    tail = parser.end()
    return out + ([tail] if tail is not None else [])


def test_data_lines_comments_and_other_fields() -> None:
    lines = [
        ": keep-alive",
        'data: {"a": 1}',
        "",
        "event: message",
        "id: 7",
        "data:no-space",
        "data:  two spaces keep one",
        "",
        "",
        "data: [DONE]",
        "",
    ]
    assert events(lines) == ['{"a": 1}', "no-space\n two spaces keep one", "[DONE]"]


def test_an_event_without_its_blank_line_is_delivered_at_the_end() -> None:
    assert events(["data: [DONE]"]) == ["[DONE]"]
    assert events([": only a comment"]) == []


@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=30), max_size=8)
)
def test_any_payloads_come_back_as_sent(payloads: list[str]) -> None:
    lines: list[str] = []
    for payload in payloads:
        lines += [": ping", f"data: {payload}", ""]
    assert events(lines) == payloads
