"""DSML salvage: tool calls a DeepSeek model wrote into its text, read back as calls.

The parser alone (every split position of the markup across two deltas, each
variant, the fail-safe cases), then the real DeepSeek adapter over HTTP against the
scripted server replaying streams shaped as DeepSeek V4 sends them. The agent loop
running a salvaged call is in tests/e2e/test_headless.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh.llm import (
    FinishStop,
    FinishToolCalls,
    GenerateOptions,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    assemble,
    user_text,
)
from dsh.testing import FakeLLM, Reply
from dsh_plugins._shared.dsml import DsmlSalvage, Salvaged, SalvagedCall, Visible
from tests.plugins.test_llm_deepseek import deepseek, run

FULL, DOUBLE, ASCII = "\uff5c", "\u2016", "|"
VARIANTS = {"full-width": FULL, "double-bar": DOUBLE, "ascii": ASCII}


def markup(bar: str, *, envelope: str | None = "tool_calls") -> str:
    """Two calls as DeepSeek writes them, one parameter of each kind."""
    m = f"{bar}DSML{bar}"
    invokes = (
        f'<{m}invoke name="read">\n'
        f'<{m}parameter name="path" string="true">src/main.py</{m}parameter>\n'
        f'<{m}parameter name="limit" string="false">20</{m}parameter>\n'
        f"</{m}invoke>\n"
        f'<{m}invoke name="grep">\n'
        f'<{m}parameter name="pattern" string="true">a < b && "c"</{m}parameter>\n'
        f'<{m}parameter name="options" string="false">{{"ignore_case": true, "globs": ["*.py"]}}'
        f"</{m}parameter>\n"
        f"</{m}invoke>\n"
    )
    if envelope is None:
        return invokes
    return f"<{m}{envelope}>\n{invokes}</{m}{envelope}>"


PROSE_BEFORE = "I'll look at the entry point first.\n\n"
PROSE_AFTER = "\nThen I'll say what it does."
CALLS = [
    SalvagedCall("read", json.dumps({"path": "src/main.py", "limit": 20})),
    SalvagedCall(
        "grep",
        json.dumps(
            {"pattern": 'a < b && "c"', "options": {"ignore_case": True, "globs": ["*.py"]}}
        ),
    ),
]
EXPECTED: list[Salvaged] = [
    Visible(PROSE_BEFORE),
    *CALLS,
    Visible("\nThen I'll say what it does."),
]


def salvage(*deltas: str) -> list[Salvaged]:
    """Everything the parser hands back for ``deltas``, adjacent text joined."""
    parser = DsmlSalvage()
    out: list[Salvaged] = []
    for delta in deltas:
        out.extend(parser.feed(delta))
    out.extend(parser.end())
    joined: list[Salvaged] = []
    for piece in out:
        if joined and isinstance(piece, Visible) and isinstance(joined[-1], Visible):
            joined[-1] = Visible(joined[-1].text + piece.text)
        else:
            joined.append(piece)
    return joined


def shown(pieces: list[Salvaged]) -> str:
    return "".join(p.text for p in pieces if isinstance(p, Visible))


def calls(pieces: list[Salvaged]) -> list[SalvagedCall]:
    return [p for p in pieces if isinstance(p, SalvagedCall)]


# ---------------------------------------------------------------------- the parser


@pytest.mark.parametrize("bar", VARIANTS.values(), ids=VARIANTS.keys())
@pytest.mark.parametrize("envelope", ["tool_calls", "function_calls", None])
def test_every_split_position_gives_the_same_calls_and_prose(
    bar: str, envelope: str | None
) -> None:
    """Cut anywhere into two deltas, the answer reads the same: the calls whole, the
    prose around them, and not one character of markup shown."""
    answer = PROSE_BEFORE + markup(bar, envelope=envelope) + PROSE_AFTER
    for cut in range(len(answer) + 1):
        parser = DsmlSalvage()
        first = parser.feed(answer[:cut])
        rest = [*parser.feed(answer[cut:]), *parser.end()]
        for piece in (*first, *rest):
            if isinstance(piece, Visible):
                assert "DSML" not in piece.text, cut
                assert "<" + bar not in piece.text, cut
        assert salvage(answer[:cut], answer[cut:]) == EXPECTED, cut
        # The prose before the markup streams at once; the marker waits, whole.
        if cut < len(answer) - len(PROSE_AFTER):
            assert shown(first) == answer[: min(cut, len(PROSE_BEFORE))], cut


def test_only_a_possible_marker_start_is_held_back() -> None:
    parser = DsmlSalvage()
    assert parser.feed("hello<\u2016DS") == [Visible("hello")]
    assert parser.feed("ML\u2016tool_calls>") == []
    assert parser.feed('<\u2016DSML\u2016invoke name="ls"></\u2016DSML\u2016invoke>') == []
    assert parser.feed("</\u2016DSML\u2016tool_calls>\n\nbye") == [
        SalvagedCall("ls", "{}"),
        Visible("\nbye"),
    ]
    # A "<" that turns out to be prose is released as soon as that is known.
    parser = DsmlSalvage()
    assert parser.feed("if a <") == [Visible("if a ")]
    assert parser.feed(" b") == [Visible("< b")]
    assert parser.feed(" <|DSM") == [Visible(" ")]
    assert parser.feed("X") == [Visible("<|DSMX")]
    assert parser.end() == []


def test_string_true_is_the_text_as_written_and_false_a_json_value() -> None:
    m = f"{FULL}DSML{FULL}"
    values = {
        "text": ("true", '  line one\n  "two" <b>\n', '  line one\n  "two" <b>\n'),
        "number": ("false", " 3.5 ", 3.5),
        "flag": ("false", "false", False),
        "nothing": ("false", "null", None),
        "items": ("false", '[1, "two", {"three": 3}]', [1, "two", {"three": 3}]),
        "digits": ("true", "007", "007"),
    }
    parameters = "".join(
        f'<{m}parameter name="{key}" string="{kind}">{raw}</{m}parameter>'
        for key, (kind, raw, _) in values.items()
    )
    [call] = calls(salvage(f'<{m}invoke name="t">{parameters}</{m}invoke>'))
    assert call.name == "t"
    assert json.loads(call.arguments) == {key: value for key, (_, _, value) in values.items()}


def test_bare_invokes_one_after_another_are_each_a_call() -> None:
    answer = "Two reads.\n" + markup(ASCII, envelope=None) + "Done."
    assert salvage(answer) == [Visible("Two reads.\n"), *CALLS, Visible("\nDone.")]


def test_text_without_markup_passes_through_untouched() -> None:
    text = f"a < b, x <| y, <DSML> and {FULL}DSML{FULL} without the bracket"
    for cut in range(len(text) + 1):
        assert salvage(text[:cut], text[cut:]) == [Visible(text)]


M = f"{FULL}DSML{FULL}"
UNREADABLE = {
    "empty envelope": f"<{M}tool_calls>\n</{M}tool_calls>",
    "bad JSON": (
        f'<{M}invoke name="read"><{M}parameter name="limit" string="false">twenty'
        f"</{M}parameter></{M}invoke>"
    ),
    "no tool name": f'<{M}invoke><{M}parameter name="a" string="true">x</{M}parameter></{M}invoke>',
    "a parameter twice": (
        f'<{M}invoke name="r"><{M}parameter name="a" string="true">1</{M}parameter>'
        f'<{M}parameter name="a" string="true">2</{M}parameter></{M}invoke>'
    ),
    "an unknown tag inside": f'<{M}tool_calls><{M}call name="r"></{M}call></{M}tool_calls>',
    "an unclosed invoke in the envelope": (
        f'<{M}tool_calls>\n<{M}invoke name="r">\n<{M}parameter name="a" string="true">1'
        f"</{M}parameter>\n</{M}tool_calls>"
    ),
    "text between the calls": (
        f'<{M}tool_calls><{M}invoke name="r"></{M}invoke> and then '
        f'<{M}invoke name="s"></{M}invoke></{M}tool_calls>'
    ),
    "a bad string attribute": (
        f'<{M}invoke name="r"><{M}parameter name="a" string="maybe">1</{M}parameter></{M}invoke>'
    ),
    "a stray closing tag": f"</{M}tool_calls>",
    "a parameter outside an invoke": f'<{M}parameter name="a" string="true">1</{M}parameter>',
}


@pytest.mark.parametrize("raw", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_unreadable_markup_is_shown_with_a_note_and_nothing_runs(raw: str) -> None:
    """Malformed markup runs nothing, half-read or whole; it is shown as written, a
    note says so, and the prose after it is neither held nor lost."""
    answer = "Before.\n" + raw + "\nAfter it, more prose."
    for cut in (0, 9, len(answer) // 2, len(answer)):
        pieces = salvage(answer[:cut], answer[cut:])
        assert calls(pieces) == []
        text = shown(pieces)
        assert text.startswith("Before.\n")
        prose, note = text.split("\n\n(dsh: ")
        assert prose.endswith("After it, more prose.")
        assert "could not be read" in note
        assert note.endswith("nothing was run.)")
        assert raw in prose  # shown as written


def test_markup_never_closed_is_shown_at_the_end_with_the_note() -> None:
    answer = f'Reading.\n<{M}invoke name="read">\n<{M}parameter name="path" string="true">a.py'
    parser = DsmlSalvage()
    assert shown(parser.feed(answer)) == "Reading.\n"  # held: it may yet close
    ended = shown(parser.end())
    assert "```\n" + answer.removeprefix("Reading.\n") + "\n```" in ended
    assert "never closed" in ended
    assert parser.calls == 0


def test_a_fence_inside_unreadable_markup_cannot_close_the_one_around_it() -> None:
    raw = (
        f'<{M}invoke name="w"><{M}parameter name="x" string="false">```</{M}parameter></{M}invoke>'
    )
    text = shown(salvage(raw))
    assert "\n````\n" in text


# ---------------------------------------------------------------------- the adapter


def v4_stream(*contents: str, reasoning: str = "", finish: str = "stop") -> list[Any]:
    """A stream as DeepSeek V4 sends it: the role chunk, reasoning, the content deltas
    given (markup among them, as the model wrote it), the finish with usage, [DONE]."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": "0a1b2c3d-4e5f-6789-abcd-ef0123456789",
            "object": "chat.completion.chunk",
            "created": 1788566400,
            "model": "deepseek-v4-flash",
            "system_fingerprint": "fp_feb633d1f5_prod0820_fp8_kvcache",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    events: list[Any] = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    events += [chunk({"content": None, "reasoning_content": r}) for r in reasoning.split(" ") if r]
    events += [chunk({"content": c, "reasoning_content": None}) for c in contents]
    last = chunk({"content": "", "reasoning_content": None}, finish)
    last["usage"] = {
        "prompt_tokens": 900,
        "completion_tokens": 120,
        "total_tokens": 1020,
        "prompt_tokens_details": {"cached_tokens": 768},
        "prompt_cache_hit_tokens": 768,
        "prompt_cache_miss_tokens": 132,
    }
    return [*events, last, "[DONE]"]


def options() -> GenerateOptions:
    return GenerateOptions(
        provider="deepseek", model="deepseek-flash", messages=(user_text("What does main do?"),)
    )


def texts(chunks: list[StreamChunk]) -> list[str]:
    return [c.text for c in chunks if isinstance(c, TextDelta)]


def in_pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_a_recorded_v4_reply_with_markup_becomes_real_tool_calls(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeepSeek V4's shape: reasoning, prose, the markup in small content deltas, the
    finish ``stop``. The calls come out as tool-call blocks and the finish says tool
    calls, so the loop runs them; the prose stays, and no markup streams."""
    answer = PROSE_BEFORE + markup(FULL) + PROSE_AFTER
    fake_llm.add(Reply(events=v4_stream(*in_pieces(answer, 3), reasoning="Read main then grep.")))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    chunks = await run(service, options())
    assert not any("DSML" in t or FULL in t for t in texts(chunks))
    assembled = assemble(chunks)
    assert isinstance(assembled.finish, FinishToolCalls)
    text = [b for b in assembled.content if isinstance(b, TextBlock)]
    assert text == [TextBlock(text=PROSE_BEFORE + "\nThen I'll say what it does.")]
    called = [b for b in assembled.content if isinstance(b, ToolCallBlock)]
    assert [(c.name, json.loads(c.arguments)) for c in called] == [
        (call.name, json.loads(call.arguments)) for call in CALLS
    ]
    assert all(c.id.startswith("dsml-") for c in called)
    assert len({c.id for c in called}) == 2
    assert assembled.usage is not None
    assert assembled.usage.cache_read_tokens == 768


async def test_every_split_of_a_marker_across_two_events_through_the_adapter(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hello<‖DS`` + ``ML‖tool_calls>``, and every other cut of the opening marker,
    each as two SSE events: ``hello`` streams, nothing of the marker does."""
    m = f"{DOUBLE}DSML{DOUBLE}"
    opening = f"hello<{m}tool_calls>"
    rest = f'\n<{m}invoke name="ls">\n</{m}invoke>\n</{m}tool_calls>'
    cuts = range(len("hello"), len(opening) + 1)
    for cut in cuts:
        fake_llm.add(Reply(events=v4_stream(opening[:cut], opening[cut:] + rest)))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    for cut in cuts:
        chunks = await run(service, options())
        assert "".join(texts(chunks)) == "hello", cut
        assembled = assemble(chunks)
        assert isinstance(assembled.finish, FinishToolCalls), cut
        assert [
            (b.name, b.arguments) for b in assembled.content if isinstance(b, ToolCallBlock)
        ] == [("ls", "{}")], cut


async def test_unreadable_markup_through_the_adapter_runs_nothing_and_says_so(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = UNREADABLE["bad JSON"]
    fake_llm.add(Reply(events=v4_stream("Let me read it.\n", *in_pieces(raw, 5), "\nMore text.")))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, options()))
    assert isinstance(assembled.finish, FinishStop)
    [block] = assembled.content
    assert isinstance(block, TextBlock)
    assert block.text.startswith("Let me read it.\n")
    prose, note = block.text.split("\n\n(dsh: ")
    assert raw in prose
    assert prose.endswith("More text.")
    assert "could not be read" in note


async def test_markup_cut_off_by_the_stream_is_shown_not_run(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream ends (``length``) inside the markup: what was held is shown, the
    finish stays max-tokens, and no call is made of half the markup."""
    answer = PROSE_BEFORE + markup(FULL)
    fake_llm.add(Reply(events=v4_stream(*in_pieces(answer[:150], 7), finish="length")))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, options()))
    assert assembled.finish is not None
    assert assembled.finish.kind == "max-tokens"
    [block] = assembled.content
    assert isinstance(block, TextBlock)
    assert answer[len(PROSE_BEFORE) : 150] in block.text
    assert "never closed" in block.text
