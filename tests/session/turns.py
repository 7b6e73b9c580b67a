"""Building realistic turns into a session, for tests."""

from __future__ import annotations

import json

from dsh.llm import (
    AssistantMessage,
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishStop,
    FinishToolCalls,
    ModelSource,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
    tool_result,
    user_text,
)
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)

MODEL = ModelSource(provider="deepseek", model="deepseek-v4-flash")


def stream_step(
    session: Session,
    turn: int,
    step: int,
    *,
    reasoning: str = "",
    text: str = "",
    calls: list[tuple[str, str, dict[str, object]]] | None = None,
    usage: TokenUsage | None = None,
) -> AssistantMessage:
    """Stream one model answer as chunk events (words as deltas) and log its message."""
    seqs: list[int] = []

    def chunk(value: object) -> None:
        data = AssistantChunk(turn=turn, step=step, chunk=value)  # type: ignore[arg-type]
        seqs.append(session.append("assistant/chunk", data).seq)

    blocks: list[object] = []
    index = 0
    for kind, body in (("reasoning", reasoning), ("text", text)):
        if not body:
            continue
        chunk(BlockStart(index=index, block_type=kind))  # type: ignore[arg-type]
        delta = ReasoningDelta if kind == "reasoning" else TextDelta
        for word in body.split(" "):
            chunk(delta(index=index, text=word + " "))
        full = "".join(w + " " for w in body.split(" "))
        block = ReasoningBlock(text=full) if kind == "reasoning" else TextBlock(text=full)
        chunk(BlockEnd(index=index, block=block))
        blocks.append(block)
        index += 1
    for call_id, name, arguments in calls or []:
        raw = json.dumps(arguments)
        chunk(BlockStart(index=index, block_type="tool-call"))
        pieces = [raw[i : i + 5] for i in range(0, len(raw), 5)]
        for n, piece in enumerate(pieces):
            chunk(
                ToolCallDelta(
                    index=index,
                    id=CallId(call_id),
                    name=name if n == 0 else None,
                    arguments_delta=piece,
                )
            )
        block = ToolCallBlock(id=CallId(call_id), name=name, arguments=raw)
        chunk(BlockEnd(index=index, block=block))
        blocks.append(block)
        index += 1
    usage = usage or TokenUsage(input_tokens=100, output_tokens=20, cache_read_tokens=400)
    chunk(UsageChunk(usage=usage))
    chunk(Finish(reason=FinishToolCalls() if calls else FinishStop()))
    message = AssistantMessage(content=tuple(blocks), source=MODEL)  # type: ignore[arg-type]
    session.append(
        "assistant/message",
        AssistantMessageData(turn=turn, step=step, message=message, usage=usage),
        source_event_seqs=seqs,
    )
    return message


def answer_calls(session: Session, turn: int, step: int, message: AssistantMessage) -> None:
    """Start and answer every tool call of ``message``."""
    for call in message.tool_calls:
        started = session.append(
            "tool/call",
            ToolCall(
                turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments
            ),
        )
        session.append(
            "tool/result",
            ToolResult(
                turn=turn, step=step, message=tool_result(call.id, f"result of {call.name}")
            ),
            source_event_seqs=[started.seq],
        )


def complete_turn(session: Session, prompt: str, reply: str, *, with_tool: bool = True) -> int:
    """A whole turn: prompt, an optional tool step, and a final answer. Returns its number."""
    turn = session.last_turn + 1
    session.append("turn/start", TurnStart(turn=turn))
    session.append("user/message", user_text(prompt))
    step = 1
    if with_tool:
        session.append("step/start", StepStart(turn=turn, step=step))
        message = stream_step(
            session,
            turn,
            step,
            reasoning="I should look at the file first",
            text="Let me read it.",
            calls=[(f"call_{turn}_a", "read", {"path": "src/app.py"})],
        )
        answer_calls(session, turn, step, message)
        session.append("step/end", StepEnd(turn=turn, step=step))
        step += 1
    session.append("step/start", StepStart(turn=turn, step=step))
    stream_step(session, turn, step, text=reply)
    session.append("step/end", StepEnd(turn=turn, step=step))
    session.append("turn/end", TurnEnd(turn=turn, reason=TurnCompleted()))
    return turn
