"""Structural invariants of a session log, checked from the events alone.

``check_log`` returns every violation it finds as a readable line (an empty list
means the log is sound). Tests run it over logs the system wrote; debug mode can run
it after every turn.

- S1 ``events[i].seq == i``.
- S3 ``surface_op`` iff a surface type; sources only there, unique and earlier.
- S6 turns numbered 1, 2, 3…, each closed before the next opens; steps 1..n inside.
- S7 assistant and tool events carry the enclosing open turn and step.
- S8 each ``tool/call`` gets one later same-step ``tool/result`` citing it; every
  tool call of a non-interrupted ``assistant/message`` is answered before ``step/end``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh.llm import CallId
from dsh.session.events import SessionEvent, is_surface_type
from dsh.session.payloads import (
    AssistantChunk,
    AssistantMessageData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
)


def check_log(events: Sequence[SessionEvent]) -> list[str]:
    problems: list[str] = []
    turn: int | None = None
    last_turn = 0
    step: int | None = None
    last_step = 0
    owed: dict[CallId, int] = {}  # tool calls of the open step still owed a result
    started: dict[CallId, int] = {}  # call id -> tool/call seq, in the open step

    for index, event in enumerate(events):
        where = f"seq {event.seq} ({event.type})"
        if event.seq != index:
            problems.append(f"S1: event {index} has seq {event.seq}")
        surface = is_surface_type(event.type)
        if surface != (event.surface_op is not None):
            problems.append(f"S3: {where} surface_op does not match its type")
        if event.source_event_seqs is not None:
            sources = event.source_event_seqs
            if not surface:
                problems.append(f"S3: {where} carries sources but is not a surface event")
            if len(set(sources)) != len(sources) or any(s >= event.seq for s in sources):
                problems.append(f"S3: {where} sources must be unique earlier seqs")

        match event.data:
            case TurnStart(turn=number):
                if turn is not None:
                    problems.append(f"S6: {where} opens turn {number} while {turn} is open")
                if number != last_turn + 1:
                    problems.append(f"S6: {where} opens turn {number} after turn {last_turn}")
                turn, last_turn, step, last_step = number, number, None, 0
            case TurnEnd(turn=number):
                if turn != number:
                    problems.append(f"S6: {where} closes turn {number} but {turn} is open")
                if step is not None:
                    problems.append(f"S6: {where} closes the turn with step {step} open")
                turn = step = None
            case StepStart(turn=t, step=number):
                if turn is None or t != turn:
                    problems.append(f"S6: {where} opens a step outside turn {t}")
                if step is not None or number != last_step + 1:
                    problems.append(f"S6: {where} opens step {number} out of order")
                step, last_step = number, number
                owed, started = {}, {}
            case StepEnd(turn=t, step=number):
                if (t, number) != (turn, step):
                    problems.append(f"S6: {where} closes step {number} of turn {t}, not open")
                for call_id, cited in {**owed, **started}.items():
                    problems.append(f"S8: call {call_id} (seq {cited}) has no result by {where}")
                step = None
                owed, started = {}, {}
            case (
                AssistantChunk(turn=t, step=s)
                | ToolCall(turn=t, step=s)
                | ToolResult(turn=t, step=s)
                | AssistantMessageData(turn=t, step=s)
            ):
                if (t, s) != (turn, step):
                    problems.append(f"S7: {where} says turn {t} step {s}, open is {turn}/{step}")
                match event.data:
                    case AssistantMessageData(message=message, interrupted=None):
                        for call in message.tool_calls:
                            owed[call.id] = event.seq
                    case ToolCall(call_id=call_id):
                        if call_id in started:
                            problems.append(f"S8: {where} starts call {call_id} twice")
                        started[call_id] = event.seq
                    case ToolResult(message=message):
                        call_id = message.result.tool_call_id
                        owed.pop(call_id, None)
                        call_seq = started.pop(call_id, None)
                        if call_seq is not None and call_seq not in (event.source_event_seqs or ()):
                            problems.append(f"S8: {where} does not cite its tool/call {call_seq}")
    return problems
