"""The transcript of a long session, folded from its last turns: what a resumed
session shows at once, the older turns folded as the person scrolls up to them.

A session resumed through its snapshot (:mod:`dsh.session.snapshot`) holds its older
events in the log file; folding them all would read the whole log. The fold starts
at the first of the last :data:`OPENING_TURNS` turns instead, from the state the
events before it leave: the session's totals as its store kept them (the paid calls
are not read again), and the few kinds of event the status, the queue and rewinds
depend on (turn starts and ends, the request context, rewinds, the inbox, titles,
the latest answer). Older entries come :data:`PAGE_TURNS` turns at a time, each
stretch folded on its own (turns are where no entry spans two stretches) with the
entries a later rewind took back left out. Once all are paged in, the entries are
those the whole log folds into.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh.session import Pricing, Session, Spend
from dsh.session.events import event_type, registered_event_types
from dsh.ui.entries import Entry, TranscriptFold

OPENING_TURNS = 2
"""Turns folded when a long session opens: a screenful or several."""
PAGE_TURNS = 4
"""Turns folded each time scrolling reaches the oldest entry shown."""


def _title_types() -> tuple[str, ...]:
    found = []
    for name in registered_event_types():
        spec = event_type(name)
        if spec is not None and spec.title is not None:
            found.append(name)
    return tuple(found)


def fold_session(
    session: Session, cost: Pricing | None, spent: tuple[Spend, int] | None
) -> TranscriptFold:
    """``session``'s transcript: every event folded, or, for a session whose older
    events are still in the log (and whose totals ``spent`` gives: what its first
    ``n`` events paid for), its last turns, the older ones paged in on demand."""
    fold = TranscriptFold(cost=cost)
    starts = session.seqs_of("turn/start")
    if not session.reads_lazily or spent is None or len(starts) <= OPENING_TURNS:
        for event in list(session.events):
            fold.apply(event)
        return fold
    begin = starts[-OPENING_TURNS]
    fold.seed(*spent)
    _state_before(fold, session, begin)
    for event in session.events[begin:]:
        fold.apply(event)
    fold.older = _Older(session, cost, starts[:-OPENING_TURNS], begin).next
    return fold


def _state_before(fold: TranscriptFold, session: Session, begin: int) -> None:
    """Fold what the events before ``begin`` leave for the status and the queue (the
    latest request context, title and answer or rewind; the inbox), then drop the
    entries that made. A rewind in the fold to a turn before ``begin`` asks the
    session whether it holds."""
    seqs = [event.seq for event in session.inbox_events() if event.seq < begin]
    for kinds in (("request/context",), _title_types(), ("assistant/message", "history/rewound")):
        seqs += [seq for seq in session.seqs_of(*kinds) if seq < begin][-1:]
    for event in session.events_at(sorted(seqs)):
        fold.apply(event)
    fold.forget_entries()
    fold.rewind_holds = session.rewind_holds


class _Older:
    """The entries of the turns before those folded, :data:`PAGE_TURNS` at a time."""

    def __init__(
        self, session: Session, cost: Pricing | None, starts: Sequence[int], until: int
    ) -> None:
        self.session = session
        self.cost = cost
        self.starts = list(starts)
        """The ``turn/start`` seqs of the turns not folded yet."""
        self.until = until
        """The first seq folded so far."""

    def next(self) -> list[Entry]:
        """The entries of the next older stretch (empty: none left)."""
        if not self.starts:
            return []
        cut = max(0, len(self.starts) - PAGE_TURNS)
        begin = self.starts[cut] if cut else 0  # the first stretch: what precedes turn 1 too
        end, self.until, self.starts = self.until, begin, self.starts[:cut]
        fold = TranscriptFold(cost=self.cost)
        fold.seed(Spend(), end)  # only its entries count: the totals are the session's
        if begin:
            _state_before(fold, self.session, begin)
        for event in self.session.events[begin:end]:
            fold.apply(event)
        return [entry for entry in fold.entries if not self.session.shadowed(entry.seq)]
