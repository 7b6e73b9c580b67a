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


async def test_a_trickle_is_read_a_batch_at_a_time_and_a_backlog_straight_through() -> None:
    """After a read that had to wait for a little, the next one waits a moment first
    (what arrives meanwhile then comes in one read); after a backlog it does not."""
    from typing import Any

    from dsh.llm.chat_completions import _BACKLOG, _sse_lines

    event = b"data: {}\n\n"  # two lines
    backlog = event * (_BACKLOG // len(event) + 1)
    script = [
        (0.002, event),  # waited, after nothing: a trickle
        (0.002, event),
        (0.0, backlog),  # there at once
        (0.0, event),
        (0.002, event),  # waited, after a backlog
        (0.002, event),  # waited, after a trickle again
    ]
    now = 0.0
    lines = 0
    paused: list[int] = []

    class Body:
        async def aiter_bytes(self) -> Any:
            nonlocal now
            for waited, data in script:
                now += waited
                yield data

    async def pause(seconds: float) -> None:
        paused.append(lines)

    async for _line in _sse_lines(Body(), clock=lambda: now, pause=pause):  # type: ignore[arg-type]
        lines += 1
    backlog_lines = 2 * backlog.count(b"\n\n")
    assert paused == [2, 4, 2 + 2 + backlog_lines + 2 + 2 + 2]
