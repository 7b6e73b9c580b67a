"""Resuming through the snapshot beside a JSONL log gives the very session the whole
log gives: for a session built by the real loop against the scripted server (tool
calls, a ``/compact``, a rewind), whether the snapshot is fresh, older than the log,
deleted, damaged, written under another event vocabulary, or describes a log that
was changed under it."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsh.llm import TextDelta, user_text
from dsh.runtime import Runtime
from dsh.session import Pricing, Session
from dsh.session.events import register_event
from dsh.session.payloads import (
    AssistantChunk,
    InboxClaimed,
    InboxEnqueued,
    InboxUpdated,
    PromptTrigger,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
from dsh.session.snapshot import LINES_FILE, SNAPSHOT_FILE, EventLog, Snapshot
from dsh.session.store import SessionStore
from dsh.testing import FakeLLM, Reply
from dsh.ui.entries import TranscriptFold
from dsh.ui.tui.transcript_window import fold_session
from dsh.wire import Frozen
from tests.plugins.compaction.support import command, echo, start, turn
from tests.support.waits import HANG_S


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started = await start(tmp_path, fake_llm, compaction={"auto": False})
    yield started
    await started.aclose()


async def a_lived_session(runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path) -> tuple[str, Path]:
    """A session of six turns (tool calls, a compaction, two rewinds, the second back
    past the last two turns), closed; and the snapshot as it stood after its second
    turn, kept aside."""
    fake_llm.add(
        Reply(tool_calls=[echo("first report: alpha")]),
        Reply(text="Echoed the first report."),
        Reply(tool_calls=[echo("second report: beta"), echo("third: gamma")]),
        Reply(text="Both echoed."),
    )
    sessions = runtime.sessions
    sessions.snapshot_every = 0  # one at each turn's end, as a long session has
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "echo the first report")
    await turn(agent, "and the second and third")
    await sessions.flush(agent.session)
    folder = sessions.log_path(agent.session).parent
    await _snapshot_settled(sessions, agent.session)
    older = tmp_path / "older-snapshot"
    older.mkdir()
    for name in (SNAPSHOT_FILE, LINES_FILE):
        shutil.copy2(folder / name, older / name)
    fake_llm.add(Reply(text="The user had reports echoed."))
    await command(runtime, agent, "/compact")
    fake_llm.add(Reply(text="A third answer."), Reply(text="Again, the third."))
    await turn(agent, "a third question")
    agent.rewind(3)
    await turn(agent, "the third question, asked again")
    # A rewind from past the turns a resumed transcript opens with, to one before.
    fake_llm.add(Reply(text="A fifth."), Reply(text="After going back to turn 2."))
    await turn(agent, "a fifth question")
    agent.rewind(2)
    await turn(agent, "instead of the second")
    session_id = str(agent.id)
    await runtime.agents.dispose(agent)
    assert (folder / SNAPSHOT_FILE).exists()
    return session_id, older


async def _snapshot_settled(store: SessionStore, session: Session) -> None:
    await asyncio.wait_for(store._snapshot_written(session.id), HANG_S)


async def opened(home: Path, session_id: str, pricing: Pricing | None = None) -> dict[str, Any]:
    """What a new store opens ``session_id`` of a copy of ``home`` into: every derived
    view of it, and whether the snapshot was used. ``pricing``: what the runtime that
    wrote it priced calls with (the totals a snapshot keeps are priced)."""
    store = SessionStore.at(home, pricing=pricing)
    try:
        session = await store.open(session_id)
        fold = TranscriptFold(cost=pricing)
        events = list(session.events)
        # The end of the seed this open logged is stamped now: its time says nothing.
        assert events[-1].type == "session/end-seed"
        events[-1] = replace(events[-1], time=0)
        for event in events:
            fold.apply(event)
        # As the TUI folds it: its last turns, then the older ones paged in.
        windowed = fold_session(session, pricing, store.spent(session))
        pages = 0
        while windowed.older is not None:
            older = windowed.older()
            if not older:
                break
            windowed.prepend(older)
            pages += 1
        if isinstance(session.events, EventLog):
            assert pages > 0  # it did start from the last turns
        assert [vars(e) for e in windowed.entries] == [vars(e) for e in fold.entries]
        assert windowed.status == fold.status
        assert windowed.queued == fold.queued
        return {
            "snapshot used": isinstance(session.events, EventLog),
            "events": [e.to_dict() for e in events],
            "messages": [m.model_dump() for m in session.derive_messages()],
            "state": session.derived_state(),
            "turn": (session.open_turn, session.last_turn, session.first_live_seq),
            "header": session.request_header(),
            "context": session.request_context(),
            "scans": [e.seq for e in session.scan("turn/start", "history/rewound")],
            "entries": [(type(e).__name__, e.key, e.seq) for e in fold.entries],
            "status": fold.status,
        }
    finally:
        await store.aclose()


def copy_home(tmp_path: Path, name: str, change: Callable[[Path], None] | None = None) -> Path:
    """A copy of the session's home, its session folder changed by ``change``."""
    home = tmp_path / name
    shutil.copytree(tmp_path / "home", home)
    if change is not None:
        [log] = home.glob("sessions/*/*/session.jsonl")
        change(log.parent)
    return home


def deleted(folder: Path) -> None:
    (folder / SNAPSHOT_FILE).unlink()


def damaged_snapshot(folder: Path) -> None:
    data = bytearray((folder / SNAPSHOT_FILE).read_bytes())
    data[len(data) // 2] ^= 0x55
    (folder / SNAPSHOT_FILE).write_bytes(bytes(data))


def damaged_index(folder: Path) -> None:
    data = (folder / LINES_FILE).read_bytes()
    (folder / LINES_FILE).write_bytes(data[:-8])


def changed_log(folder: Path) -> None:
    """A digit of the log's last record changed (its length kept): the snapshot no
    longer describes the log."""
    log = folder / "session.jsonl"
    data = bytearray(log.read_bytes())
    at = data.rindex(b'"time":') + len(b'"time":')
    data[at] = ord("0") + (data[at] - ord("0") + 1) % 10
    log.write_bytes(bytes(data))


async def test_turn_ends_write_a_snapshot_once_the_log_grew_by_snapshot_every(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A snapshot costs as much as the whole log: one at every turn's end would make
    turns dearer as a session grows. One is written at the turn end that finds the
    log grown by ``snapshot_every`` events since the last, so a process killed between
    two resumes through it, reading the turns after it, to the state of a whole read."""
    sessions = runtime.sessions
    agent = await runtime.agents.create(tmp_path / "project")
    fake_llm.add(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    await turn(agent, "first")
    await sessions.flush(agent.session)
    folder = sessions.log_path(agent.session).parent
    sessions.snapshot_every = len(agent.session.events) + 1  # the second turn passes it
    await _snapshot_settled(sessions, agent.session)
    assert not (folder / SNAPSHOT_FILE).exists()

    await turn(agent, "second")
    await sessions.flush(agent.session)
    await _snapshot_settled(sessions, agent.session)
    covered = Snapshot.from_bytes((folder / SNAPSHOT_FILE).read_bytes()).next_seq
    assert covered == len(agent.session.events)

    await turn(agent, "third")  # fewer new events than snapshot_every: none written
    await sessions.flush(agent.session)
    await _snapshot_settled(sessions, agent.session)
    assert Snapshot.from_bytes((folder / SNAPSHOT_FILE).read_bytes()).next_seq == covered
    assert len(agent.session.events) > covered

    # Killed here (no close): the copies are what a new process finds.
    session_id = str(agent.id)
    killed = await opened(copy_home(tmp_path, "killed"), session_id, runtime.llm.cost)
    whole = await opened(copy_home(tmp_path, "whole", deleted), session_id, runtime.llm.cost)
    assert killed["snapshot used"]
    assert not whole["snapshot used"]
    assert {k: v for k, v in killed.items() if k != "snapshot used"} == {
        k: v for k, v in whole.items() if k != "snapshot used"
    }


async def test_a_resume_through_the_snapshot_equals_the_whole_read(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    session_id, older = await a_lived_session(runtime, fake_llm, tmp_path)

    whole = await opened(copy_home(tmp_path, "whole", deleted), session_id, runtime.llm.cost)
    assert not whole["snapshot used"]
    assert any(e["type"] == "history/rewound" for e in whole["events"])
    assert any(isinstance(e.get("surfaceOp"), dict) for e in whole["events"])  # compacted

    def older_snapshot(folder: Path) -> None:
        for name in (SNAPSHOT_FILE, LINES_FILE):
            shutil.copy2(older / name, folder / name)

    fresh = await opened(copy_home(tmp_path, "fresh"), session_id, runtime.llm.cost)
    behind = await opened(
        copy_home(tmp_path, "behind", older_snapshot), session_id, runtime.llm.cost
    )
    assert fresh["snapshot used"]
    assert behind["snapshot used"]
    for case in (fresh, behind):
        assert {k: v for k, v in case.items() if k != "snapshot used"} == {
            k: v for k, v in whole.items() if k != "snapshot used"
        }

    for name, change in (
        ("damaged-snapshot", damaged_snapshot),
        ("damaged-index", damaged_index),
        ("changed-log", changed_log),
    ):
        found = await opened(copy_home(tmp_path, name, change), session_id, runtime.llm.cost)
        assert not found["snapshot used"], name
        if name != "changed-log":  # that one is another log: only the fallback counts
            assert found == whole, name


def a_turn_left_open(folder: Path) -> None:
    """A turn started after the snapshot, then the process killed: its records end
    the log, the turn never ended."""
    log = folder / "session.jsonl"
    data = log.read_bytes()
    last = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[1])
    seq = last.get("seq", last.get("seq0", 0) + len(last.get("data", {}).get("texts", [])))
    start = {"type": "turn/start", "seq": seq + 1, "time": last.get("time", 0) + 1}
    start["data"] = {"turn": 99, "trigger": {"kind": "prompt"}}
    log.write_bytes(data + json.dumps(start, separators=(",", ":")).encode() + b"\n")


def a_torn_tail(folder: Path) -> None:
    """Half a record after the snapshot (a write cut short)."""
    log = folder / "session.jsonl"
    log.write_bytes(log.read_bytes() + b'{"type":"turn/start","seq":')


async def test_a_tail_to_repair_is_read_whole_and_repaired(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """What crash repair mends after the snapshot (a turn left open, a torn last
    record) is the whole read's to mend, as before: never taken through it."""
    session_id, _ = await a_lived_session(runtime, fake_llm, tmp_path)
    for name, change, issue in (
        ("open-turn", a_turn_left_open, "interrupted-turn"),
        ("torn", a_torn_tail, "torn-tail"),
    ):
        home = copy_home(tmp_path, name, change)
        store = SessionStore.at(home, pricing=runtime.llm.cost)
        try:
            session = await store.open(session_id)
            assert not session.reads_lazily, name
            assert issue in [found.kind for found in session.load_issues], name
            assert session.open_turn is None
        finally:
            await store.aclose()


class Extra(Frozen):
    note: str


async def test_a_snapshot_written_under_another_vocabulary_is_not_used(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    session_id, _ = await a_lived_session(runtime, fake_llm, tmp_path)
    before = await opened(copy_home(tmp_path, "before"), session_id, runtime.llm.cost)
    assert before["snapshot used"]
    unregister = register_event("extra/note", Extra)
    try:
        after = await opened(copy_home(tmp_path, "after"), session_id, runtime.llm.cost)
    finally:
        unregister()
    assert not after["snapshot used"]
    assert {k: v for k, v in after.items() if k != "snapshot used"} == {
        k: v for k, v in before.items() if k != "snapshot used"
    }


def test_an_event_log_reads_like_the_list_it_stands_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexing, slices, iteration both ways and scattered reads give the list's
    events, across the line between the file and memory, with a cache smaller than
    what is read."""
    monkeypatch.setattr("dsh.session.snapshot.CACHED_LINES", 5)
    monkeypatch.setattr(EventLog, "STRETCH", 7)

    async def scenario() -> None:
        store = SessionStore.at(tmp_path / "home")
        session = await store.create(str(tmp_path))
        for n in range(40):
            session.append("turn/start", TurnStart(turn=n + 1, trigger=PromptTrigger()))
            session.append("user/message", user_text(f"prompt {n}"))
            for k in range(4):  # a packed run of chunks: one record, four events
                chunk = TextDelta(index=0, text=f"piece {n}.{k}")
                session.append("assistant/chunk", AssistantChunk(turn=n + 1, step=1, chunk=chunk))
            session.append("turn/end", TurnEnd(turn=n + 1, reason=TurnCompleted()))
            # Inbox items: most claimed, some updated, two left waiting.
            item = f"item-{n}"
            session.append(
                "inbox/enqueued",
                InboxEnqueued(item_id=item, message=user_text(f"later {n}"), placement="queued"),
            )
            if n % 7 == 3:
                session.append("inbox/updated", InboxUpdated(item_id=item, message=user_text("x")))
            if n not in (10, 24):
                session.append("inbox/claimed", InboxClaimed(item_ids=(item,)))
        whole = [e.to_dict() for e in session.events]
        waiting = [e.to_dict() for e in session.inbox_events()]
        assert [e["data"]["itemId"] for e in waiting] == [
            "item-10",
            "item-10",
            "item-24",
            "item-24",
        ]
        await store.close(session)
        await store.aclose()

        again = SessionStore.at(tmp_path / "home")
        try:
            resumed = await again.open(session.id)
            log = resumed.events
            assert isinstance(log, EventLog)
            resumed.append("user/message", user_text("after the snapshot"))
            await again.flush(resumed)  # the log's line index grows past what it covers
            expected = [*whole, resumed.events[-2].to_dict(), resumed.events[-1].to_dict()]
            assert [e.to_dict() for e in log] == expected
            assert [e.to_dict() for e in reversed(log)] == expected[::-1]
            assert [log[i].to_dict() for i in range(len(log))] == expected
            assert log[-1].to_dict() == expected[-1]
            for start, stop in ((0, 3), (5, 17), (100, len(log)), (len(log) - 3, len(log))):
                assert [e.to_dict() for e in log[start:stop]] == expected[start:stop]
            assert [e.to_dict() for e in log[::9]] == expected[::9]
            picked = [200, 3, 17, 3, len(log) - 1]
            assert [e.to_dict() for e in log.events(picked)] == [expected[i] for i in picked]
            starts = [e["seq"] for e in expected if e["type"] == "turn/start"]
            assert [e.seq for e in resumed.scan("turn/start")] == starts
            assert [e.seq for e in resumed.scan_back("turn/start")] == starts[::-1]
            assert [e.to_dict() for e in resumed.inbox_events()] == waiting
            with pytest.raises(IndexError):
                log[len(log)]
        finally:
            await again.aclose()

    asyncio.run(scenario())
