"""What the model is told when its turn was cut short: by the person, or by a
dropped connection.

Without it, the next request shows the model its own answer cut off mid-sentence, or
tool calls answered "cancelled", and nothing saying why: models then resume the work
the person just stopped. So a turn the user cancels (Esc, Ctrl+C) ends with a
``user/message`` of dsh's own (``PluginSource(plugin="dsh", form="notice")``) saying
that the user interrupted and what was cut off. It is logged like any message, so the
request that follows is rebuilt from the log as every other one is.

A stream cut after content arrived (the connection dropped mid-answer: the codes in
:data:`CUT_CODES`) is not only a failed turn: the turn keeps what arrived and, up to
:data:`MAX_CONTINUATIONS` times, takes another step whose ``user/message`` (the same
source) asks the model to go on from where its answer stops. Nothing runs that would
not have: a cut answer's tool calls are never kept.

Public API: ``interruption_note(session, turn)``; ``continuation_note(failure)``;
``CUT_CODES``, ``MAX_CONTINUATIONS``.
"""

from __future__ import annotations

from dsh.llm import LlmFailure, PluginSource, TextBlock, UserMessage
from dsh.session import AssistantMessageData, Session, ToolCall, ToolResult, TurnStart

NOTE_SOURCE = PluginSource(plugin="dsh", form="notice")
CUT_CODES = frozenset({"STREAM_CLOSED", "TRANSPORT", "TIMEOUT"})
"""Failures that cut a stream which had been answering: the connection, not the model."""
MAX_CONTINUATIONS = 2
"""Cut answers one turn goes on with unasked; a third cut ends the turn with the error."""
STOPPED_CODES = frozenset({"TOOL_CANCELLED"})
"""A tool result that says the call was stopped while it ran."""


def interruption_note(session: Session, turn: int) -> UserMessage:
    """The note for ``turn`` of ``session``, which the user just stopped."""
    answer_cut = False
    names: dict[str, str] = {}
    stopped: list[str] = []
    not_run: list[str] = []
    started = False
    # From the turn's start, and only the kinds it reads: a long log stays in its file.
    begin = next((e.seq for e in session.scan_back("turn/start") if e.data.turn == turn), 0)
    kinds = ("turn/start", "assistant/message", "tool/call", "tool/result")
    for event in session.events_at([seq for seq in session.seqs_of(*kinds) if seq >= begin]):
        data = event.data
        if isinstance(data, TurnStart):
            started = data.turn == turn
            continue
        if not started:
            continue
        if isinstance(data, AssistantMessageData) and data.turn == turn:
            answer_cut = bool(data.interrupted)
        elif isinstance(data, ToolCall) and data.turn == turn:
            names[data.call_id] = data.name
        elif isinstance(data, ToolResult) and data.turn == turn and data.error is not None:
            call_id = data.message.source.call_id
            name = names.get(call_id, data.error.name)
            if data.error.code in STOPPED_CODES:
                stopped.append(name)
            elif data.error.code not in ("TOOL_ERROR", "TOOL_TIMEOUT"):
                not_run.append(name)
    parts = ["[The user interrupted this turn."]
    if answer_cut:
        parts.append("Your answer was cut off where it ends above.")
    if stopped:
        parts.append(f"Stopped while running: {', '.join(stopped)}.")
    if not_run:
        parts.append(f"Not run: {', '.join(not_run)}.")
    if not (answer_cut or stopped or not_run):
        parts.append("They stopped it before your answer arrived.")
    parts.append("Do not pick the interrupted work up again unless they ask you to.]")
    return UserMessage(content=(TextBlock(text=" ".join(parts)),), source=NOTE_SOURCE)


def continuation_note(failure: LlmFailure) -> UserMessage:
    """What asks the model to go on with an answer ``failure`` cut off."""
    text = (
        f"[The connection dropped while your answer was streaming ({failure.message}); "
        "it was cut off where it ends above. Continue from exactly that point, "
        "without repeating what is already there.]"
    )
    return UserMessage(content=(TextBlock(text=text),), source=NOTE_SOURCE)
