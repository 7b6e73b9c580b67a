"""Model history, derived from the log's surface.

The surface is the ordered list of surface-event seqs that currently make up the
conversation. ``append`` adds a node; ``replace`` swaps a run of nodes for one (a
plugin's summary of them, say): the one way history is rewritten, so a log's history
derives the same whether or not the plugin that rewrote it is loaded. History is each node's message, in surface order, with two
repairs, so every request is one a provider accepts: a tool call that never got a
result (the process died, a cancel raced it) gets a synthetic error result, and a
result whose call is not in history (its line was damaged) is left out.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from dsh.llm import (
    AssistantMessage,
    CallId,
    Message,
    MessageId,
    ToolResultMessage,
    tool_result,
)
from dsh.session.events import ReplaceOp, SessionEvent
from dsh.session.payloads import AssistantMessageData, HistoryRewound, ToolResult, TurnStart

UNANSWERED_CALL_TEXT = (
    "This tool call was interrupted before it returned a result, so its outcome is "
    "unknown. Re-run it only if it is read-only or idempotent; otherwise check its "
    "effects first."
)


class SurfaceError(ValueError):
    """A surface operation names nodes that are not current, or not in order."""


def event_message(event: SessionEvent) -> Message | None:
    """The message a surface event contributes to history, if any."""
    match event.type:
        case "user/message" | "steering/message":
            return event.data if isinstance(event.data, Message) else None
        case "assistant/message":
            data = event.data
            if isinstance(data, AssistantMessageData) and data.message.content:
                return data.message
            return None  # a usage-only record of an empty answer
        case "tool/result":
            return event.data.message if isinstance(event.data, ToolResult) else None
        case _:
            return None


class Surface:
    """The current surface nodes, and a generation bumped by every replace."""

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.generation = 0

    def positions(self, op: ReplaceOp) -> tuple[int, int]:
        """Where ``op``'s start and end nodes stand; raises if either is gone or misordered."""
        try:
            first = self.nodes.index(op.start)
            last = self.nodes.index(op.end)
        except ValueError:
            raise SurfaceError(
                f"replace {op.start}..{op.end} names a node not on the surface"
            ) from None
        if first > last:
            raise SurfaceError(f"replace {op.start}..{op.end}: start comes after end")
        return first, last

    def apply(self, event: SessionEvent) -> None:
        match event.surface_op:
            case None:
                return
            case "append":
                self.nodes.append(event.seq)
            case ReplaceOp() as op:
                first, last = self.positions(op)
                self.nodes[first : last + 1] = [event.seq]
                self.generation += 1


class Rewinds:
    """The runs of a log that rewinds shadow: a ``history/rewound`` at seq ``at`` going
    back to ``start`` (a turn's ``turn/start``) shadows ``start .. at - 1``. A rewind
    can only go back to a turn still in view, so two runs are nested or apart."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, int]] = []
        """(start, at) of every rewind that holds, in log order."""

    def shadowed(self, seq: int) -> bool:
        return any(start <= seq < at for start, at in self.runs)

    def problem(
        self, events: Sequence[SessionEvent], at: int, rewind: HistoryRewound
    ) -> str | None:
        """Why a rewind logged at ``at`` cannot hold in ``events``, or None."""
        start = rewind.to_seq
        if start >= at or start >= len(events):
            return f"rewind to seq {start}, which is not before it"
        data = events[start].data
        if not isinstance(data, TurnStart) or data.turn != rewind.turn:
            return f"rewind to turn {rewind.turn}: seq {start} is not that turn's turn/start"
        if self.shadowed(start):
            return f"rewind to turn {rewind.turn}, which an earlier rewind took back already"
        return None


def rewinds_of(events: Sequence[SessionEvent]) -> Rewinds:
    """The rewinds that hold in ``events`` (a stored log, an export)."""
    rewinds = Rewinds()
    for event in events:
        data = event.data
        if isinstance(data, HistoryRewound) and rewinds.problem(events, event.seq, data) is None:
            rewinds.runs.append((data.to_seq, event.seq))
    return rewinds


def surface_before(events: Sequence[SessionEvent], end: int, rewinds: Rewinds) -> list[int]:
    """The surface nodes as they stood just before seq ``end``: the surface operations
    of ``events[:end]`` replayed, each rewind among them putting back the surface its
    turn started with."""
    runs = [(start, at) for start, at in rewinds.runs if at < end]
    wanted = {start for start, _ in runs}
    back_to = {at: start for start, at in runs}
    kept: dict[int, list[int]] = {}
    surface = Surface()
    for event in events[:end]:
        if event.seq in wanted:
            kept[event.seq] = list(surface.nodes)
        start = back_to.get(event.seq)
        if start is not None:
            surface.nodes = list(kept[start])
            continue
        try:
            surface.apply(event)
        except SurfaceError:
            surface.nodes.append(event.seq)  # as a seed's damaged replace is kept
    return surface.nodes


def synthetic_result(call_id: CallId) -> ToolResultMessage:
    """The stand-in result for a call that never got one. Its id is derived from the
    call id, so deriving history twice gives identical messages."""
    message = tool_result(call_id, UNANSWERED_CALL_TEXT, is_error=True)
    stable = MessageId(str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh:unanswered-call:{call_id}")))
    return message.model_copy(update={"id": stable})


class HistoryFold:
    """The derivation below, one message at a time, so that a growing surface extends
    the history it derived before instead of deriving it all again."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.pending: list[CallId] = []  # calls of the latest tool-calling message, unanswered

    def add(self, message: Message) -> None:
        if isinstance(message, ToolResultMessage):
            call_id = message.result.tool_call_id
            if call_id not in self.pending:
                # Its call is not in history (lost with a damaged line, say, or answered
                # already): providers refuse a result that answers no call.
                return
            self.pending.remove(call_id)
            self.messages.append(message)
            return
        self.messages.extend(synthetic_result(call_id) for call_id in self.pending)
        self.pending.clear()
        self.messages.append(message)
        if isinstance(message, AssistantMessage):
            self.pending.extend(call.id for call in message.tool_calls)

    def result(self) -> list[Message]:
        return self.messages + [synthetic_result(call_id) for call_id in self.pending]


def derive_history(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with a synthetic result after each tool call left unanswered."""
    fold = HistoryFold()
    for message in messages:
        fold.add(message)
    return fold.result()
