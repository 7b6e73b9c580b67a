"""What the model is told when the person stops a turn.

Without it, the next request shows the model its own answer cut off mid-sentence, or
tool calls answered "cancelled", and nothing saying why: models then resume the work
the person just stopped. So a turn the user cancels (Esc, Ctrl+C) ends with a
``user/message`` of dsh's own (``PluginSource(plugin="dsh", form="notice")``) saying
that the user interrupted and what was cut off. It is logged like any message, so the
request that follows is rebuilt from the log as every other one is.

Public API: ``interruption_note(session, turn)``, the message, or None when the turn
left nothing to say (it never reached the model).
"""

from __future__ import annotations

from dsh.llm import PluginSource, TextBlock, UserMessage
from dsh.session import AssistantMessageData, Session, ToolCall, ToolResult, TurnStart

NOTE_SOURCE = PluginSource(plugin="dsh", form="notice")
STOPPED_CODES = frozenset({"TOOL_CANCELLED"})
"""A tool result that says the call was stopped while it ran."""


def interruption_note(session: Session, turn: int) -> UserMessage:
    """The note for ``turn`` of ``session``, which the user just stopped."""
    answer_cut = False
    names: dict[str, str] = {}
    stopped: list[str] = []
    not_run: list[str] = []
    started = False
    for event in session.events:
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
