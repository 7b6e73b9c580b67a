"""A session whose process was killed replays: the real ``dsh -p`` is SIGKILLed at a
known point of a turn (a tool running, a stream open), its log then read as crash
repair closes it, and, after a ``--resume`` that repaired it for real and went on,
replayed again. The replay stops its runtime where the killed one stopped (nothing
after it stored, no closing events of its own), and its own store's repair closes the
turn; a change to what that repair writes is caught in the request after the resume."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from dsh.replay.compare import Report, compare
from dsh.replay.recorded import Kill, read_recording
from dsh.replay.run import ReplayOptions, ReplayRun, replay
from dsh.session import SessionEvent, SessionStore, TurnEnd, TurnInterrupted, check_log
from dsh.session.jsonl import FILE_NAME
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh
from tests.support.replays import started_for
from tests.support.vocabulary import async_plugin_vocabulary
from tests.support.waits import HANG_S

SLOW = Reply(
    # The echo tool waits in dsh's own process: the kill ends it, nothing outlives dsh.
    tool_calls=[ToolCallSpec(name="echo", arguments={"text": "slow", "delay": 10 * HANG_S})]
)
HELD = Reply(text="An answer whose stream never comes.", hold_after=0, keepalive_interval_ms=20)
"""The server sends the headers and holds (its keep-alive comments tell it when the
client has gone): the log ends at the request."""


def _stored_types(home: Path) -> list[str]:
    """The types of the events the child's log holds on disk so far (whole lines)."""
    found: list[str] = []
    for log in home.glob(f"sessions/*/*/{FILE_NAME}"):
        for line in log.read_text().splitlines():
            try:
                found.append(json.loads(line)["type"])
            except (ValueError, KeyError):
                continue  # a line being written, or the header
    return found


async def _killed_at(dsh: Dsh, fake_llm: FakeLLM, last: str) -> str:
    """Run ``dsh -p`` and SIGKILL it once its log on disk ends with an event of type
    ``last`` and the server has its request (the reply it waits on never comes); the
    session's id."""
    child = await dsh.start("-p", "call the slow echo")

    def there() -> bool:
        stored = _stored_types(dsh.home)
        return bool(stored) and stored[-1] == last and len(fake_llm.chat_requests) == 1

    async with asyncio.timeout(HANG_S):
        while not there():
            assert child.returncode is None, "dsh ended before it was killed"
            await asyncio.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    await asyncio.wait_for(child.wait(), HANG_S)
    [session_id] = await dsh.session_ids()
    return session_id


async def _replayed(dsh: Dsh, session_id: str) -> tuple[ReplayRun, Report, list[SessionEvent]]:
    """The session as the e2e check reads it (repaired in memory), replayed with the
    settings it ran with; and the recorded events."""
    store = SessionStore.at(dsh.home)
    try:
        async with async_plugin_vocabulary():
            loaded = await store.persistence.inspect(session_id)  # type: ignore[arg-type]
            started = started_for(dsh.home, loaded.header.created_at)
            run = await replay(
                read_recording(loaded.header, loaded.events),
                ReplayOptions(settings=started.settings),
            )
    finally:
        await store.aclose()
    return run, compare(run), list(loaded.events)


def _shape(events: list[SessionEvent]) -> list[str]:
    """Where a log's turns ended and where it was opened again, in order."""
    shape = []
    for event in events:
        if isinstance(event.data, TurnEnd):
            shape.append(f"turn {event.data.turn} {event.data.reason.kind}")
        elif event.type == "session/end-seed":
            shape.append("opened again")
    return shape


def _repair_results(events: list[SessionEvent]) -> list[str | None]:
    return [
        e.data.error.code if e.data.error is not None else None
        for e in events
        if e.type == "tool/result"
    ]


@pytest.mark.parametrize(("reply", "last"), [(SLOW, "tool/call"), (HELD, "request/context")])
async def test_a_killed_turn_replays_before_and_after_the_resume(
    dsh: Dsh, fake_llm: FakeLLM, reply: Reply, last: str
) -> None:
    fake_llm.add(reply)
    session_id = await _killed_at(dsh, fake_llm, last)

    # Never opened again: the log is read as the next open's repair would close it.
    run, report, recorded = await _replayed(dsh, session_id)
    assert report.identical, report.text()
    [kill] = run.recording.kills
    assert kill == Kill(
        kill.seq, last, 1, (), turn=1, request=-1 if last == "tool/call" else 0, resumed=False
    )
    assert kill.seq == [e.seq for e in recorded if e.type == last][-1]
    assert _shape(run.events) == _shape(recorded) == ["turn 1 interrupted"]
    assert _repair_results(run.events) == _repair_results(recorded)
    assert "its process was killed" in report.text()

    # A new process resumes it: its store writes the repair, and the session goes on.
    fake_llm.add(Reply(text="Picked up again."))
    done = await dsh.run("-p", "go on", "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]
    run, report, recorded = await _replayed(dsh, session_id)
    assert report.identical, report.text()
    assert check_log(recorded) == []
    assert _shape(run.events) == _shape(recorded)
    assert _shape(recorded) == ["turn 1 interrupted", "opened again", "turn 2 completed"]
    assert _repair_results(run.events) == _repair_results(recorded)
    if last == "tool/call":
        assert _repair_results(recorded) == ["TOOL_OUTCOME_UNKNOWN"]
    [kill] = run.recording.kills
    assert kill.resumed
    # The replay's own log was cut at the kill: its repair closed the turn as the
    # recorded one's did, event for event.
    interrupted = [
        e.seq
        for log in (run.events, recorded)
        for e in log
        if isinstance(e.data, TurnEnd) and isinstance(e.data.reason, TurnInterrupted)
    ]
    assert interrupted[0] == interrupted[1]
    assert [e.type for e in run.events] == [e.type for e in recorded]


async def test_a_change_to_what_the_repair_writes_is_caught_after_the_resume(
    dsh: Dsh, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(SLOW, Reply(text="Picked up again."))
    session_id = await _killed_at(dsh, fake_llm, "tool/call")
    done = await dsh.run("-p", "go on", "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]

    # This dsh's repair tells the model something else of the call the kill cut short.
    monkeypatch.setattr(
        "dsh.session.repair.OUTCOME_UNKNOWN_TEXT", "dsh was stopped; the call may have run."
    )
    _, report, _ = await _replayed(dsh, session_id)
    assert not report.identical
    first = report.first
    assert first is not None
    said = first.describe()
    assert first.where == "request 2 (turn 2, step 1)", said
    assert "content" in first.what, said
    assert "dsh was stopped; the call may have run." in said
    changed = [d.where for d in report.differences]
    assert "tool call 1 (echo)" in changed
