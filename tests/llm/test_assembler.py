from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from dsh.llm import (
    Block,
    BlockAssembler,
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishAborted,
    FinishError,
    FinishMaxTokens,
    FinishStop,
    FinishToolCalls,
    LlmFailure,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    StreamProtocolError,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
    Violation,
    assemble,
)

CHUNKS: TypeAdapter[Any] = TypeAdapter(list[StreamChunk])

# ---------------------------------------------------------------------- strategies

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@dataclass
class Spec:
    """One block the generated stream should assemble into."""

    block: Block
    index: int
    value: Any = None  # the JSON value of a tool call's arguments


def split(data: st.DataObject, text: str) -> list[str]:
    """``text`` cut at random points (empty pieces included, as providers send them)."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


@st.composite
def valid_streams(draw: st.DrawFn, finish: str | None = None) -> tuple[list[Any], list[Spec]]:
    data = draw(st.data())
    kinds = draw(
        st.lists(st.sampled_from(["text", "reasoning", "tool-call"]), min_size=0, max_size=6)
    )
    indexes = draw(
        st.lists(st.integers(0, 50), min_size=len(kinds), max_size=len(kinds), unique=True)
    )
    specs: list[Spec] = []
    queues: list[list[Any]] = []
    for n, (kind, index) in enumerate(zip(kinds, indexes, strict=True)):
        queue: list[Any] = [BlockStart(index=index, block_type=kind)]  # type: ignore[arg-type]
        if kind == "tool-call":
            value = draw(json_values)
            arguments = json.dumps(value, ensure_ascii=draw(st.booleans()))
            call_id = CallId(f"call_{n}")
            name = draw(st.sampled_from(["read", "bash", "edit", "grep"]))
            pieces = split(data, arguments)
            # The name arrives on the first delta; some providers repeat it later.
            repeat_name = draw(st.booleans())
            for i, piece in enumerate(pieces):
                queue.append(
                    ToolCallDelta(
                        index=index,
                        id=call_id,
                        name=name if i == 0 or repeat_name else None,
                        arguments_delta=piece,
                    )
                )
            block: Block = ToolCallBlock(id=call_id, name=name, arguments=arguments)
            specs.append(Spec(block, index, value))
        else:
            text = draw(st.text(max_size=40))
            delta = TextDelta if kind == "text" else ReasoningDelta
            queue.extend(delta(index=index, text=piece) for piece in split(data, text))
            block = TextBlock(text=text) if kind == "text" else ReasoningBlock(text=text)
            specs.append(Spec(block, index))
        queue.append(BlockEnd(index=index, block=block))
        queues.append(queue)

    # Interleave the blocks' chunks at random, each block's own order kept.
    stream: list[Any] = []
    while any(queues):
        live = [q for q in queues if q]
        stream.append(data.draw(st.sampled_from(live)).pop(0))
    # The expected order is the order in which blocks were opened.
    opened = [chunk.index for chunk in stream if isinstance(chunk, BlockStart)]
    specs.sort(key=lambda spec: opened.index(spec.index))

    if draw(st.booleans()):
        stream.append(
            UsageChunk(
                usage=TokenUsage(
                    input_tokens=draw(st.integers(0, 10**6)),
                    output_tokens=draw(st.integers(0, 10**6)),
                    cache_read_tokens=draw(st.none() | st.integers(0, 10**6)),
                    reasoning_tokens=draw(st.none() | st.integers(0, 10**6)),
                )
            )
        )
    has_calls = any(isinstance(spec.block, ToolCallBlock) for spec in specs)
    kind = finish or draw(st.sampled_from(["natural", "max-tokens"]))
    if kind == "max-tokens":
        reason: Any = FinishMaxTokens()
    else:
        reason = FinishToolCalls() if has_calls else FinishStop()
    stream.append(Finish(reason=reason))
    return stream, specs


# ---------------------------------------------------------------------- properties


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams())
def test_any_valid_stream_assembles_into_its_blocks_in_opening_order(
    generated: tuple[list[Any], list[Spec]],
) -> None:
    stream, specs = generated
    assembler = assemble(stream)
    finish = stream[-1].reason
    expected = [
        spec.block
        for spec in specs
        if not (isinstance(finish, FinishMaxTokens) and isinstance(spec.block, ToolCallBlock))
    ]
    assert list(assembler.content) == expected
    assert assembler.finish == finish
    usage = [chunk.usage for chunk in stream if isinstance(chunk, UsageChunk)]
    assert assembler.usage == (usage[0] if usage else None)
    # Arguments are the model's exact text, and parse back to what was sent.
    for spec in specs:
        if isinstance(spec.block, ToolCallBlock) and spec.block in assembler.content:
            produced = next(b for b in assembler.content if b == spec.block)
            assert isinstance(produced, ToolCallBlock)
            assert json.loads(produced.arguments) == spec.value

    message = assembler.message(provider="deepseek", model="deepseek-v4-flash")
    assert message.content == tuple(expected)
    assert message.source.provider == "deepseek"


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams(), st.data())
def test_a_stream_cut_anywhere_keeps_what_the_user_saw(
    generated: tuple[list[Any], list[Spec]], data: st.DataObject
) -> None:
    stream, _ = generated
    cut = data.draw(st.integers(0, len(stream) - 1))  # the finish never arrives
    assembler = assemble(stream[:cut])
    assert not assembler.finished

    partial: dict[int, list[str]] = {}
    kinds: dict[int, str] = {}
    for chunk in stream[:cut]:
        match chunk:
            case BlockStart(index=index, block_type=block_type):
                partial[index], kinds[index] = [], block_type
            case TextDelta(index=index, text=text) | ReasoningDelta(index=index, text=text):
                partial[index].append(text)
    expected = [
        TextBlock(text="".join(parts))
        if kinds[i] == "text"
        else ReasoningBlock(text="".join(parts))
        for i, parts in partial.items()
        if kinds[i] != "tool-call" and "".join(parts).strip()
    ]
    assert list(assembler.interrupted_blocks()) == expected
    with pytest.raises(StreamProtocolError) as caught:
        assembler.message(provider="p", model="m")
    assert caught.value.violation is Violation.MISSING_FINISH


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams())
def test_chunks_round_trip_through_json_exactly(generated: tuple[list[Any], list[Spec]]) -> None:
    stream, _ = generated
    encoded = CHUNKS.dump_json(stream, exclude_none=True)
    assert CHUNKS.validate_json(encoded) == stream


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams(), st.data())
def test_any_chunk_after_finish_is_refused(
    generated: tuple[list[Any], list[Spec]], data: st.DataObject
) -> None:
    stream, _ = generated
    assembler = assemble(stream)
    extra = data.draw(
        st.sampled_from(
            [
                UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=1)),
                Finish(reason=FinishStop()),
                BlockStart(index=99, block_type="text"),
                TextDelta(index=99, text="late"),
            ]
        )
    )
    with pytest.raises(StreamProtocolError) as caught:
        assembler.push(extra)
    assert caught.value.violation is Violation.CHUNK_AFTER_FINISH


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams(), st.data())
def test_dropping_a_block_start_is_refused(
    generated: tuple[list[Any], list[Spec]], data: st.DataObject
) -> None:
    stream, _specs = generated
    starts = [i for i, chunk in enumerate(stream) if isinstance(chunk, BlockStart)]
    if not starts:
        return
    drop = data.draw(st.sampled_from(starts))
    broken = stream[:drop] + stream[drop + 1 :]
    with pytest.raises(StreamProtocolError) as caught:
        assemble(broken)
    assert caught.value.violation is Violation.UNOPENED_BLOCK


# ---------------------------------------------------------------------- every violation

FAIL = LlmFailure(message="connection reset", code="TRANSPORT")
T0 = BlockStart(index=0, block_type="text")
R1 = BlockStart(index=1, block_type="reasoning")
C2 = BlockStart(index=2, block_type="tool-call")
USAGE = UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=4))

VIOLATIONS: dict[Violation, list[Any]] = {
    Violation.CHUNK_AFTER_FINISH: [Finish(reason=FinishStop()), USAGE],
    Violation.UNOPENED_BLOCK: [TextDelta(index=0, text="no start")],
    Violation.BLOCK_ALREADY_OPENED: [T0, T0],
    Violation.BLOCK_ALREADY_ENDED: [
        T0,
        TextDelta(index=0, text="a"),
        BlockEnd(index=0, block=TextBlock(text="a")),
        TextDelta(index=0, text="b"),
    ],
    Violation.DELTA_TYPE_MISMATCH: [R1, TextDelta(index=1, text="text into reasoning")],
    Violation.TOOL_CALL_ID_MISMATCH: [
        C2,
        ToolCallDelta(index=2, id=CallId("a"), name="read", arguments_delta="{"),
        ToolCallDelta(index=2, id=CallId("b"), arguments_delta="}"),
    ],
    Violation.TOOL_CALL_NAME_MISMATCH: [
        C2,
        ToolCallDelta(index=2, id=CallId("a"), name="read", arguments_delta="{"),
        ToolCallDelta(index=2, id=CallId("a"), name="write", arguments_delta="}"),
    ],
    Violation.BLOCK_END_MISMATCH: [
        T0,
        TextDelta(index=0, text="hello"),
        BlockEnd(index=0, block=TextBlock(text="hullo")),
    ],
    Violation.DUPLICATE_USAGE: [USAGE, USAGE],
    Violation.UNCLOSED_BLOCK: [T0, TextDelta(index=0, text="cut"), Finish(reason=FinishStop())],
}


def test_every_violation_has_a_case() -> None:
    assert set(VIOLATIONS) | {Violation.MISSING_FINISH} == set(Violation)


@pytest.mark.parametrize("violation", list(VIOLATIONS), ids=str)
def test_each_violation_is_refused_with_its_code_and_position(violation: Violation) -> None:
    chunks = VIOLATIONS[violation]
    assembler = BlockAssembler()
    for chunk in chunks[:-1]:
        assembler.push(chunk)
    with pytest.raises(StreamProtocolError) as caught:
        assembler.push(chunks[-1])
    assert caught.value.violation is violation
    assert caught.value.position == len(chunks) - 1
    assert caught.value.chunk == chunks[-1]
    assert str(violation) in str(caught.value)


def test_missing_finish_is_refused_when_the_message_is_asked_for() -> None:
    assembler = assemble([T0, TextDelta(index=0, text="partial")])
    with pytest.raises(StreamProtocolError) as caught:
        assembler.message(provider="p", model="m")
    assert caught.value.violation is Violation.MISSING_FINISH


@pytest.mark.parametrize(
    "block",
    [
        ReasoningBlock(text="hello"),  # wrong type for a text block
        ToolCallBlock(id=CallId("x"), name="read", arguments="hello"),
    ],
)
def test_a_block_end_of_another_type_is_a_mismatch(block: Block) -> None:
    assembler = assemble([T0, TextDelta(index=0, text="hello")])
    with pytest.raises(StreamProtocolError) as caught:
        assembler.push(BlockEnd(index=0, block=block))
    assert caught.value.violation is Violation.BLOCK_END_MISMATCH


@pytest.mark.parametrize(
    "block",
    [
        ToolCallBlock(id=CallId("other"), name="read", arguments="{}"),
        ToolCallBlock(id=CallId("a"), name="grep", arguments="{}"),
        ToolCallBlock(id=CallId("a"), name="read", arguments='{"x": 1}'),
    ],
)
def test_a_tool_call_end_must_match_its_deltas(block: ToolCallBlock) -> None:
    assembler = assemble(
        [C2, ToolCallDelta(index=2, id=CallId("a"), name="read", arguments_delta="{}")]
    )
    with pytest.raises(StreamProtocolError) as caught:
        assembler.push(BlockEnd(index=2, block=block))
    assert caught.value.violation is Violation.BLOCK_END_MISMATCH


def test_a_refused_chunk_leaves_the_assembler_unchanged() -> None:
    assembler = assemble([T0, TextDelta(index=0, text="hel")])
    with pytest.raises(StreamProtocolError):
        assembler.push(ReasoningDelta(index=0, text="wrong kind"))
    assembler.feed(
        [
            TextDelta(index=0, text="lo"),
            BlockEnd(index=0, block=TextBlock(text="hello")),
            Finish(reason=FinishStop()),
        ]
    )
    assert assembler.content == (TextBlock(text="hello"),)


@pytest.mark.parametrize(
    "reason", [FinishAborted(failure=FAIL), FinishError(failure=FAIL)], ids=["aborted", "error"]
)
def test_failed_finishes_may_leave_blocks_open(reason: Any) -> None:
    assembler = assemble(
        [
            R1,
            ReasoningDelta(index=1, text="thinking"),
            T0,
            TextDelta(index=0, text="  "),  # blank: the user saw nothing worth keeping
            C2,
            ToolCallDelta(index=2, id=CallId("a"), name="read", arguments_delta='{"pa'),
            Finish(reason=reason),
        ]
    )
    assert assembler.failed
    assert assembler.content == ()
    assert assembler.interrupted_blocks() == (ReasoningBlock(text="thinking"),)


def test_max_tokens_drops_tool_calls_but_keeps_text() -> None:
    assembler = assemble(
        [
            T0,
            TextDelta(index=0, text="Let me read it."),
            BlockEnd(index=0, block=TextBlock(text="Let me read it.")),
            C2,
            ToolCallDelta(index=2, id=CallId("a"), name="read", arguments_delta='{"path": "a"}'),
            BlockEnd(
                index=2, block=ToolCallBlock(id=CallId("a"), name="read", arguments='{"path": "a"}')
            ),
            Finish(reason=FinishMaxTokens()),
        ]
    )
    assert assembler.content == (TextBlock(text="Let me read it."),)


def test_a_tool_call_ended_without_deltas_takes_its_block() -> None:
    call = ToolCallBlock(id=CallId("z"), name="todo_read", arguments="")
    assembler = assemble([C2, BlockEnd(index=2, block=call), Finish(reason=FinishToolCalls())])
    assert assembler.content == (call,)
