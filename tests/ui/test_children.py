"""A session's child sessions as ``/agents`` lists them: stored ones from the catalog
(forks left out), and a live child that is not stored yet."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsh.llm import user_text
from dsh.session import Session, SessionStore, TurnStart
from dsh.ui.children import child_sessions, run_status
from tests.session.turns import complete_turn


@dataclass
class LiveAgent:
    """What the listing reads of an agent of this process: its session."""

    session: Session
    label: str | None = None

    @property
    def id(self) -> str:
        return self.session.id


async def test_children_are_the_subagents_sessions_newest_first(tmp_path: Path) -> None:
    store = SessionStore.at(tmp_path)
    try:
        parent = await store.create(str(tmp_path))
        complete_turn(parent, "Do it", "Done.", with_tool=False)
        await store.flush(parent)
        stored = await store.create(str(tmp_path), parent=parent.id, origin="subagent")
        complete_turn(stored, "First child's task\nmore", "Its answer.", with_tool=False)
        await store.close(stored)
        fork = await store.fork(parent.id)
        await store.close(fork)
        other = await store.create(str(tmp_path))  # no parent: not a child
        complete_turn(other, "Unrelated", "Yes.", with_tool=False)
        await store.close(other)
        live = await store.create(str(tmp_path), parent=parent.id, origin="subagent")
        agents = [LiveAgent(live)]

        starting = await child_sessions(store, agents, parent.id)  # type: ignore[arg-type]
        # (in one millisecond or two: their order is the clock's, tested with the TUI)
        assert {(c.id, c.title, c.status, c.live) for c in starting} == {
            (live.id, "(starting)", "idle", True),  # nothing stored of it yet
            (stored.id, "First child's task", "completed", False),  # its first line
        }

        live.append("turn/start", TurnStart(turn=1))
        live.append("user/message", user_text("Second child's task"))
        listed = await child_sessions(store, agents, parent.id)  # type: ignore[arg-type]
        [running] = [child for child in listed if child.live]
        assert (running.title, running.status) == ("Second child's task", "running")
        agents[0].label = "survey the notes"  # a live child's task, as its agent names it
        listed = await child_sessions(store, agents, parent.id)  # type: ignore[arg-type]
        assert [child.title for child in listed if child.live] == ["survey the notes"]
        assert await child_sessions(store, [], other.id) == []
        await store.close(live)
    finally:
        await store.aclose()


def test_a_stored_turn_that_never_ended_is_unfinished() -> None:
    class Event:
        type = "turn/start"
        data = None

    assert run_status([Event()], live=False) == "unfinished"  # type: ignore[list-item]
    assert run_status([], live=False) == "idle"
