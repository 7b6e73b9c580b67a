"""Random valid session logs, and what a provider accepts as a history.

:func:`valid_logs` draws sessions the way the agent loop writes them: turns of steps,
prompts and context, steering at later steps, streamed answers (reasoning, text,
parallel tool calls), results in order, cancels that answer the calls left with an
error, interrupted and empty answers, failed turns, resumes (``session/end-seed``),
compaction replacing whole turns, and a crash that cuts the log anywhere, closed by
crash repair. :func:`provider_problems` lists what a chat-completions provider would
refuse in a history.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from dsh.llm import (
    AssistantMessage,
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishError,
    FinishStop,
    FinishToolCalls,
    GenerateOptions,
    LlmFailure,
    Message,
    ModelSource,
    PluginSource,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultMessage,
    UsageChunk,
    new_session_id,
    tool_result,
    user_text,
)
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    ReplaceOp,
    Session,
    SessionEvent,
    SessionHeader,
    StepEnd,
    StepStart,
    ToolCall,
    ToolErrorIdentity,
    ToolResult,
    TurnAborted,
    TurnCompleted,
    TurnEnd,
    TurnFailed,
    TurnMaxSteps,
    TurnStart,
)
from dsh.session.payloads import CancelByUser
from dsh.session.repair import closing_events
from dsh_plugins._shared.chat_completions import ChatModel, request_body

MODEL = ModelSource(provider="deepseek", model="deepseek-v4-flash")
# Text with quotes, escapes, newlines and non-ASCII, but no lone surrogates (not UTF-8).
WORDS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x1F600),
    min_size=1,
    max_size=10,
)


def new_session(
    events: Sequence[SessionEvent] = (), header: SessionHeader | None = None
) -> Session:
    """A session (seeded with ``events``, as a resume loads them) on a steady clock."""
    ticks = itertools.count(1_700_000_000_000 + len(events) * 10)
    header = header or SessionHeader(id=new_session_id(), created_at=1, cwd="/work/project")
    return Session(header, events, clock=lambda: next(ticks))


class _Writer:
    """Appends one turn at a time, as the loop would."""

    def __init__(self, draw: Any, session: Session) -> None:
        self.draw = draw
        self.session = session
        self.calls = itertools.count()

    def chunk(self, turn: int, step: int, chunk: Any, seqs: list[int]) -> None:
        data = AssistantChunk(turn=turn, step=step, chunk=chunk)
        seqs.append(self.session.append("assistant/chunk", data).seq)

    def stream(
        self, turn: int, step: int, *, calls: int, complete: bool = True
    ) -> tuple[list[Any], list[int]]:
        """Stream an answer; returns its blocks (only those that ended) and chunk seqs."""
        draw, seqs, blocks = self.draw, [], []
        index = 0
        parts: list[tuple[str, str]] = []
        if draw(st.booleans()):
            parts.append(("reasoning", "".join(draw(st.lists(WORDS, min_size=1, max_size=3)))))
        if draw(st.booleans()) or not calls:
            parts.append(("text", "".join(draw(st.lists(WORDS, min_size=1, max_size=3)))))
        for kind, text in parts:
            self.chunk(turn, step, BlockStart(index=index, block_type=kind), seqs)  # type: ignore[arg-type]
            delta = ReasoningDelta if kind == "reasoning" else TextDelta
            self.chunk(turn, step, delta(index=index, text=text), seqs)
            block = ReasoningBlock(text=text) if kind == "reasoning" else TextBlock(text=text)
            if complete:
                self.chunk(turn, step, BlockEnd(index=index, block=block), seqs)
            blocks.append(block)
            index += 1
        for _ in range(calls):
            call_id = CallId(f"call_{next(self.calls)}")
            arguments = json.dumps({"text": draw(WORDS)})
            self.chunk(turn, step, BlockStart(index=index, block_type="tool-call"), seqs)
            delta = ToolCallDelta(index=index, id=call_id, name="echo", arguments_delta=arguments)
            self.chunk(turn, step, delta, seqs)
            block = ToolCallBlock(id=call_id, name="echo", arguments=arguments)
            self.chunk(turn, step, BlockEnd(index=index, block=block), seqs)
            blocks.append(block)
            index += 1
        return blocks, seqs

    def answer(self, turn: int, step: int, blocks: list[Any], seqs: list[int], **extra: Any) -> Any:
        message = AssistantMessage(content=tuple(blocks), source=MODEL)
        data = AssistantMessageData(
            turn=turn,
            step=step,
            message=message,
            usage=TokenUsage(input_tokens=10, output_tokens=5),
            **extra,
        )
        self.session.append("assistant/message", data, source_event_seqs=seqs)
        return message

    def result(
        self, turn: int, step: int, call: ToolCallBlock, text: str, code: str | None
    ) -> None:
        started = self.session.append(
            "tool/call",
            ToolCall(
                turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments
            ),
        )
        self.session.append(
            "tool/result",
            ToolResult(
                turn=turn,
                step=step,
                message=tool_result(call.id, text, is_error=True if code else None),
                error=ToolErrorIdentity(name=call.name, code=code) if code else None,
            ),
            source_event_seqs=[started.seq],
        )

    def turn(self) -> None:
        draw, session = self.draw, self.session
        turn = session.last_turn + 1
        session.append("turn/start", TurnStart(turn=turn))
        end: Any = TurnCompleted()
        steps = draw(st.integers(1, 4))
        for step in range(1, steps + 1):
            session.append("step/start", StepStart(turn=turn, step=step))
            if step == 1:
                if draw(st.booleans()):
                    context = user_text(
                        draw(WORDS), source=PluginSource(plugin="env", form="snapshot")
                    )
                    session.append("user/message", context)
                session.append("user/message", user_text(draw(WORDS)))
            else:
                for _ in range(draw(st.integers(0, 2))):
                    session.append("steering/message", user_text(draw(WORDS)))
            kind = draw(st.sampled_from(["answer", "tools", "tools", "interrupted", "empty"]))
            if kind == "tools":
                count = draw(st.integers(1, 3))
                blocks, seqs = self.stream(turn, step, calls=count)
                self.chunk(turn, step, Finish(reason=FinishToolCalls()), seqs)
                message = self.answer(turn, step, blocks, seqs)
                cancel_at = draw(st.integers(0, count)) if draw(st.booleans()) else count
                for number, call in enumerate(message.tool_calls):
                    if number < cancel_at:
                        self.result(turn, step, call, f"done {number}", None)
                    else:
                        self.result(
                            turn,
                            step,
                            call,
                            "Error: cancelled before it ran.",
                            "ABORTED_BEFORE_DISPATCH",
                        )
                session.append("step/end", StepEnd(turn=turn, step=step))
                if cancel_at < count:
                    end = TurnAborted(reason=CancelByUser())
                    break
                if step == steps:
                    end = TurnMaxSteps(limit=steps)
                continue
            if kind == "answer":
                blocks, seqs = self.stream(turn, step, calls=0)
                self.chunk(turn, step, Finish(reason=FinishStop()), seqs)
                self.answer(turn, step, blocks, seqs)
            elif kind == "interrupted":
                # Cut mid-stream: what was shown is kept, tool calls are not.
                blocks, seqs = self.stream(turn, step, calls=0, complete=False)
                self.answer(turn, step, blocks, seqs, interrupted=True)
                end = TurnAborted(reason=CancelByUser())
            else:
                # An answer with nothing in it: a usage-only record, and a failed turn.
                seqs: list[int] = []
                failure = LlmFailure(message="the model returned nothing", code="EMPTY_RESPONSE")
                self.chunk(
                    turn, step, UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=0)), seqs
                )
                self.chunk(turn, step, Finish(reason=FinishError(failure=failure)), seqs)
                self.answer(turn, step, [], seqs)
                end = TurnFailed(error=failure)
            session.append("step/end", StepEnd(turn=turn, step=step))
            break
        session.append("turn/end", TurnEnd(turn=turn, reason=end))

    def compact(self) -> None:
        """Replace a run of whole turns' surface nodes with one summary node."""
        session, draw = self.session, self.draw
        nodes = session.surface_nodes
        cuts = safe_cuts(session)
        if len(cuts) < 2:
            return
        first = draw(st.sampled_from(cuts[:-1]))
        later = [c for c in cuts if c > first]
        last = draw(st.sampled_from(later))
        shadowed = nodes[first:last]
        summary = user_text(
            f"<summary>{len(shadowed)} messages</summary>",
            source=PluginSource(plugin="compaction", form="notice"),
        )
        session.append(
            "user/message",
            summary,
            surface_op=ReplaceOp(start=shadowed[0], end=shadowed[-1]),
            source_event_seqs=list(shadowed),
        )


def safe_cuts(session: Session) -> list[int]:
    """Positions p of the surface (0..len) where nodes[:p] answer every call they make:
    a compaction may start or end there without parting a call from its result."""
    nodes = session.surface_nodes
    pending: set[CallId] = set()
    cuts = [0]
    for position, seq in enumerate(nodes, start=1):
        data = session.events[seq].data
        if isinstance(data, AssistantMessageData) and data.interrupted is None:
            pending |= {call.id for call in data.message.tool_calls}
        elif isinstance(data, ToolResult):
            pending.discard(data.message.result.tool_call_id)
        if not pending:
            cuts.append(position)
    return cuts


@st.composite
def valid_logs(draw: Any, max_turns: int = 4, crash: bool = True) -> Session:
    session = new_session()
    writer = _Writer(draw, session)
    for _ in range(draw(st.integers(1, max_turns))):
        if session.events and draw(st.integers(0, 4)) == 0:
            # Resumed: loaded again, with a session/end-seed after what was stored.
            session = writer.session = new_session(list(session.events), session.header)
        if session.events and draw(st.integers(0, 3)) == 0:
            writer.compact()
        writer.turn()
    if crash and draw(st.booleans()):
        cut = draw(st.integers(1, len(session.events)))
        kept = list(session.events[:cut])
        session = new_session(kept + closing_events(kept), session.header)
    return session


# ---------------------------------------------------------------------- provider rules


def provider_problems(history: Sequence[Message]) -> list[str]:
    """What a chat-completions provider refuses: every tool call answered by a result
    right after its message, no result without its call, no empty assistant message,
    call ids unique; and the same rules on the serialised request body."""
    problems: list[str] = []
    pending: list[CallId] = []
    seen: set[CallId] = set()
    for index, message in enumerate(history):
        if isinstance(message, ToolResultMessage):
            call_id = message.result.tool_call_id
            if call_id not in pending:
                problems.append(f"message {index}: a result for {call_id}, which is not pending")
            else:
                pending.remove(call_id)
            continue
        if pending:
            problems.append(f"message {index}: calls {pending} unanswered before it")
            pending = []
        if message.role not in ("user", "assistant"):
            problems.append(f"message {index}: role {message.role}")
        if isinstance(message, AssistantMessage):
            if not message.content:
                problems.append(f"message {index}: an empty assistant message")
            for call in message.tool_calls:
                if call.id in seen:
                    problems.append(f"message {index}: call id {call.id} used twice")
                seen.add(call.id)
                pending.append(call.id)
    if pending:
        problems.append(f"the history ends with calls {pending} unanswered")
    problems += body_problems(history)
    return problems


def body_problems(history: Sequence[Message]) -> list[str]:
    options = GenerateOptions(
        provider="deepseek", model="deepseek-v4-flash", messages=tuple(history)
    )
    body = request_body(options, ChatModel(replay_reasoning=True, thinking=True))
    problems = []
    open_calls: list[str] = []
    for index, entry in enumerate(body["messages"]):
        if entry["role"] == "tool":
            if entry["tool_call_id"] not in open_calls:
                problems.append(f"body message {index}: tool message for no open call")
            else:
                open_calls.remove(entry["tool_call_id"])
            continue
        if open_calls:
            problems.append(f"body message {index}: {entry['role']} before results {open_calls}")
            open_calls = []
        if entry["role"] == "assistant":
            open_calls = [call["id"] for call in entry.get("tool_calls", [])]
            if not entry.get("content") and not entry.get("tool_calls"):
                problems.append(f"body message {index}: an assistant message with nothing")
    if open_calls:
        problems.append(f"body: calls {open_calls} never answered")
    return problems
