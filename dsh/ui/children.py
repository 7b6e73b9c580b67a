"""A session's child sessions (the sessions its subagents ran on) and how each stands.

The catalog knows which sessions name a session as their parent; the header of each
says whether it is a fork (left out here) or a delegated run, and its events how its
last turn ended. A child whose agent lives in this process is read from memory (the
store may not have written its latest events yet) and is ``running`` while a turn is
open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh.llm import SessionId, UserMessage, UserSource

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.session import SessionEvent, SessionStore

CHILDREN_LIMIT = 100
"""Child sessions listed (newest first)."""
OUTCOMES = {"completed": "completed", "aborted": "cancelled", "error": "failed"}


@dataclass(frozen=True)
class ChildSession:
    id: str
    title: str
    """Its title, else the first line of its first prompt (as the person or the parent
    agent wrote it: shown through :func:`~dsh.control_chars.visible`)."""
    status: str
    created_at: int
    live: bool


def live_agent(agents: Sequence[Agent], session_id: str) -> Agent | None:
    """The agent of this process that runs on ``session_id``, if one does."""
    return next((agent for agent in agents if agent.session.id == session_id), None)


def run_status(events: Sequence[SessionEvent], *, live: bool) -> str:
    """``running`` (a live turn open), ``completed``, ``cancelled``, ``failed``, another
    end's kind, ``unfinished`` (stored with a turn that never ended), or ``idle``."""
    for event in reversed(events):
        if event.type == "turn/start":
            return "running" if live else "unfinished"
        if event.type == "turn/end":
            kind = str(getattr(getattr(event.data, "reason", None), "kind", "ended"))
            return OUTCOMES.get(kind, kind)
    return "idle"


async def child_sessions(
    sessions: SessionStore, agents: Sequence[Agent], parent_id: str
) -> list[ChildSession]:
    """The sessions that delegated runs of ``parent_id`` wrote, newest first; forks of
    it are left out. Empty without a catalog."""
    catalog = sessions.catalog
    if catalog is None:
        return []
    await sessions.indexed()  # a child's first batch may still be on its way
    children: list[ChildSession] = []
    for row in await catalog.children(parent_id, limit=CHILDREN_LIMIT):
        agent = live_agent(agents, row.id)
        if agent is not None:
            header, events = agent.session.header, list(agent.session.events)
        else:
            try:
                loaded = await sessions.persistence.inspect(SessionId(row.id))
            except Exception:  # deleted or unreadable since it was indexed
                continue
            header, events = loaded.header, loaded.events
        if header.origin == "fork":
            continue
        children.append(
            ChildSession(
                id=row.id,
                # A live child's label (its task's description) says most; stored, the
                # catalog's title or first prompt.
                title=(agent.label if agent is not None else None) or row.display_title,
                status=run_status(events, live=agent is not None),
                created_at=row.created_at,
                live=agent is not None,
            )
        )
    # A child that has only just started may not be stored (so indexed) yet.
    listed = {child.id for child in children}
    for agent in agents:
        header = agent.session.header
        if header.parent_session != parent_id or agent.id in listed or header.origin == "fork":
            continue
        live_events = agent.session.events
        children.append(
            ChildSession(
                id=agent.id,
                title=agent.label or first_prompt(live_events) or "(starting)",
                status=run_status(live_events, live=True),
                created_at=header.created_at,
                live=True,
            )
        )
    children.sort(key=lambda child: child.created_at, reverse=True)
    return children


def first_prompt(events: Sequence[SessionEvent]) -> str | None:
    """The first line of the session's first message from its user (the parent agent,
    for a child)."""
    for event in events:
        data = event.data
        if isinstance(data, UserMessage) and isinstance(data.source, UserSource):
            lines = data.text().strip().splitlines()
            return lines[0][:80] if lines else None
    return None
