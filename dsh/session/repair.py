"""Closing a turn that a crash left open.

When the process dies mid-turn, the log ends inside a turn, perhaps inside a step
with tool calls that never got a result. Before the session continues, it gets the
events a clean end would have written: an error result for each unanswered call,
the step's end, and ``turn/end`` with reason ``interrupted``. Nothing recorded before
the crash is changed or dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from dsh.llm import CallId, MessageId, tool_result
from dsh.session.events import SessionEvent
from dsh.session.payloads import (
    AssistantMessageData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolErrorIdentity,
    ToolResult,
    TurnEnd,
    TurnInterrupted,
    TurnStart,
)

OUTCOME_UNKNOWN_TEXT = (
    "dsh stopped while this tool was running, so its outcome is unknown. Re-run it only "
    "if it is read-only or idempotent; otherwise check what it did (or ask the user) first."
)
NOT_STARTED_TEXT = "dsh stopped before this tool call started; it did not run."


def closing_events(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """The events that close the turn ``events`` ends inside of (none if it is closed)."""
    turn = step = None
    step_at = 0
    for event in events:
        match event.data:
            case TurnStart(turn=number):
                turn, step = number, None
            case StepStart(step=number):
                step, step_at = number, event.seq
            case StepEnd():
                step = None
            case TurnEnd():
                turn = step = None
    if turn is None:
        return []

    out: list[SessionEvent] = []
    stamp = events[-1].time
    seq = len(events)

    def add(type_: str, data: object, sources: tuple[int, ...] | None = None) -> None:
        nonlocal seq
        out.append(
            SessionEvent(
                type=type_,
                seq=seq,
                time=stamp,
                data=data,
                surface_op="append" if type_ == "tool/result" else None,
                source_event_seqs=sources,
            )
        )
        seq += 1

    if step is not None:
        calls: dict[CallId, tuple[str, int]] = {}  # call id -> (tool name, citing seq)
        started: set[CallId] = set()
        answered: set[CallId] = set()
        for event in events[step_at:]:
            match event.data:
                case AssistantMessageData(message=message, interrupted=None):
                    for call in message.tool_calls:
                        calls.setdefault(call.id, (call.name, event.seq))
                case ToolCall(call_id=call_id, name=name):
                    calls[call_id] = (name, event.seq)
                    started.add(call_id)
                case ToolResult(message=message):
                    answered.add(message.result.tool_call_id)
        for call_id, (name, cite) in calls.items():
            if call_id in answered:
                continue
            unknown = call_id in started
            add(
                "tool/result",
                ToolResult(
                    turn=turn,
                    step=step,
                    message=tool_result(
                        call_id,
                        OUTCOME_UNKNOWN_TEXT if unknown else NOT_STARTED_TEXT,
                        is_error=True,
                    ).model_copy(update={"id": _repair_id(call_id, seq)}),
                    error=ToolErrorIdentity(
                        name=name, code="TOOL_OUTCOME_UNKNOWN" if unknown else "TOOL_NOT_STARTED"
                    ),
                ),
                (cite,),
            )
        add("step/end", StepEnd(turn=turn, step=step))
    add("turn/end", TurnEnd(turn=turn, reason=TurnInterrupted()))
    return out


def _repair_id(call_id: CallId, seq: int) -> MessageId:
    """The id of an error result repair writes: derived from what it answers, so a log
    read (and repaired in memory) before a resume and the log the resume repairs and
    stores agree event for event."""
    return MessageId(str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh-repair:{call_id}:{seq}")))
