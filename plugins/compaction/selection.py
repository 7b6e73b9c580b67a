"""Which part of the history a compaction replaces: the oldest part, up to a cut.

Everything before the cut (the head) becomes one summary; everything from it on (the
tail) stays verbatim. A cut never separates a tool call from its result, and the tail
is never empty. The preferred cut is at a turn boundary, so that the latest turns
stay whole:

- automatic compaction keeps as many recent turns as fit in the ``keep`` budget;
- ``/compact`` keeps only the latest turn (within the same budget).

When the latest turn alone is bigger than the budget (a long run of tool calls), or is
the only one, the cut falls inside it instead, keeping its most recent steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dsh.llm import AssistantMessage, ToolResultMessage
from dsh.session import SessionEvent, TurnEnd, TurnStart, event_message

SUMMARY_PLUGIN = "compact"
"""The ``plugin`` of the source of every summary message."""

Mode = Literal["manual", "pressure", "overflow"]
WORK = frozenset({"assistant/message", "tool/result"})


@dataclass(frozen=True)
class Cut:
    head: tuple[int, ...]
    """The seqs of the nodes to replace, in surface order (from the first node on)."""
    head_tokens: int
    tail_tokens: int


def valid_cuts(events: Sequence[SessionEvent], nodes: Sequence[int]) -> list[int]:
    """Positions ``p`` (1 <= p < len(nodes)) where the tail may begin: no result in
    ``nodes[p:]`` answers a call made in ``nodes[:p]``."""
    calls: dict[str, int] = {}  # call id -> position of the message that made it
    blocked = [False] * (len(nodes) + 1)
    for position, seq in enumerate(nodes):
        message = event_message(events[seq])
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                calls[call.id] = position
        elif isinstance(message, ToolResultMessage):
            made = calls.get(message.result.tool_call_id)
            if made is not None:
                for inside in range(made + 1, position + 1):
                    blocked[inside] = True
    return [p for p in range(1, len(nodes)) if not blocked[p]]


def turn_boundaries(events: Sequence[SessionEvent], nodes: Sequence[int]) -> set[int]:
    """Positions where the nodes of a turn begin."""
    turn_of: dict[int, int | None] = {}
    wanted = set(nodes)
    current: int | None = None
    for event in events:
        match event.data:
            case TurnStart(turn=number):
                current = number
            case TurnEnd():
                current = None
        if event.seq in wanted:
            turn_of[event.seq] = current
    return {
        p
        for p in range(1, len(nodes))
        if turn_of.get(nodes[p]) is not None and turn_of.get(nodes[p]) != turn_of.get(nodes[p - 1])
    }


def choose_cut(
    events: Sequence[SessionEvent],
    nodes: Sequence[int],
    tokens: Sequence[int],
    *,
    keep: int,
    mode: Mode,
) -> Cut | None:
    """Where to cut ``nodes`` (whose sizes are ``tokens``), keeping at most ``keep``
    tokens verbatim where possible. None when no cut leaves anything worth summarising
    (an answer or a tool result) before it."""
    cuts = valid_cuts(events, nodes)
    if not cuts:
        return None
    tail = [0] * (len(nodes) + 1)
    for position in range(len(nodes) - 1, -1, -1):
        tail[position] = tail[position + 1] + tokens[position]
    boundaries = turn_boundaries(events, nodes)

    def useful(p: int) -> bool:
        # Something of the model's own to summarise: a lone prompt is not worth it.
        return any(events[seq].type in WORK for seq in nodes[:p])

    fitting = [p for p in cuts if tail[p] <= keep and useful(p)]
    at_turns = [p for p in fitting if p in boundaries]
    chosen: int | None = None
    if at_turns:
        # Pressure keeps as many whole turns as fit; /compact only the latest one.
        chosen = at_turns[-1] if mode == "manual" else at_turns[0]
    elif fitting:
        # Inside the latest turn: pressure keeps what fits, /compact its last steps.
        chosen = fitting[-1] if mode == "manual" else fitting[0]
    else:
        usable = [p for p in cuts if useful(p)]
        chosen = usable[-1] if usable else None
    if chosen is None:
        return None
    return Cut(tuple(nodes[:chosen]), tail[0] - tail[chosen], tail[chosen])
