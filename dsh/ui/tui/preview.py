"""A stored session's transcript read straight from storage, before the runtime and
its plugins have loaded: a long session is on screen in half the time. Once the
agent resumes it, the transcript is built again with costs and the plugins' tool
views."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dsh.bulk import collector_paused
from dsh.llm import SessionId
from dsh.session.events import SessionEvent
from dsh.session.jsonl import JsonlPersistence
from dsh.session.session import Session
from dsh.session.spend import Pricing, Spend
from dsh.session.store import make_persistence
from dsh.settings_tables import Backend
from dsh.ui.entries import TranscriptFold
from dsh.ui.tui.transcript_window import fold_session


async def stored_fold(home: Path, backend: Backend, session_id: str) -> TranscriptFold | None:
    """The transcript fold of the session stored as ``session_id`` (an exact id; None
    for a prefix, which the catalog resolves once the runtime is up), through its
    snapshot when it has one: what the runtime reads next."""
    persistence = make_persistence(backend, home)
    wanted = SessionId(session_id)
    try:
        if not await persistence.exists(wanted):
            return None
        peeked = None
        if isinstance(persistence, JsonlPersistence):
            peeked = await persistence.peek(wanted)
        loaded = None if peeked is not None else await persistence.inspect(wanted)
    finally:
        await persistence.close()
    with collector_paused():  # an entry for every event or so: see dsh.bulk
        if peeked is not None:
            header, opened = peeked
            state = opened.snapshot.state
            spent = Spend.from_json(state["spend"])
            for event in opened.log.recent:
                spent.count(event, None)
            base = len(opened.log)
            return fold_session(Session.resumed(header, state, opened.log), None, (spent, base))
    assert loaded is not None
    return fold_of(loaded.events, None)


def fold_of(events: Iterable[SessionEvent], cost: Pricing | None) -> TranscriptFold:
    """The transcript of ``events``, folded whole (no snapshot to start from)."""
    fold = TranscriptFold(cost=cost)
    with collector_paused():  # an entry for every event or so: see dsh.bulk
        for event in events:
            fold.apply(event)
    return fold
