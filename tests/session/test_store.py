from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from dsh.llm import SessionId, TokenUsage, user_text
from dsh.session import (
    AmbiguousSessionError,
    Catalog,
    ForkError,
    SessionBusyError,
    SessionEvent,
    SessionNotFoundError,
    SessionStore,
    StepEnd,
    StepStart,
    TurnCompleted,
    TurnEnd,
    TurnStart,
    check_log,
)
from dsh.session import writer as writer_module
from dsh.session.jsonl import JsonlPersistence
from dsh.session.sqlite import SqlitePersistence
from dsh.session.store import make_persistence
from dsh_plugins.title.events import SessionTitle
from tests.session.turns import complete_turn
from tests.support.waits import HANG_S

T = TypeVar("T")


@pytest.fixture(params=["jsonl", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened = SessionStore.at(tmp_path, request.param)
    yield opened
    await opened.aclose()


def reopen(store: SessionStore, home: Path) -> SessionStore:
    """The same storage seen from a new process, once the first has died (the kernel
    drops a dead process's locks)."""
    if store.locks is not None:
        store.locks.release_all()
    return SessionStore.at(home, store.persistence.name)  # type: ignore[arg-type]


async def test_events_become_durable_and_reopen(store: SessionStore, tmp_path: Path) -> None:
    session = await store.create("/work/app", model="deepseek-v4-flash")
    complete_turn(session, "what does main do?", "It starts the server.")
    assert await store.flush(session)

    other = reopen(store, tmp_path)
    try:
        reopened = await other.open(session.id)
        assert [e.to_dict() for e in reopened.events[: len(session.events)]] == [
            e.to_dict() for e in session.events
        ]
        assert reopened.events[-1].type == "session/end-seed"
        assert reopened.derive_messages() == session.derive_messages()
        assert reopened.last_turn == 1
        assert reopened.load_issues == ()
    finally:
        await other.aclose()


async def test_a_closed_session_leaves_nothing_in_the_backend_and_opens_again(
    store: SessionStore, tmp_path: Path
) -> None:
    """A long day opens hundreds of sessions (``/new`` after ``/new``): the backend
    keeps nothing of those closed (a JSONL log's line index grew the process by some
    20 KB a session), and a closed one opens and goes on as before."""
    persistence = store.persistence
    kept = persistence._files if isinstance(persistence, JsonlPersistence) else None
    sessions = []
    for n in range(5):
        session = await store.create("/work/app", model="deepseek-v4-flash")
        complete_turn(session, f"question {n}", f"answer {n}")
        assert await store.close(session)
        sessions.append(session)
    if kept is not None:
        assert kept == {}
    else:
        assert isinstance(persistence, SqlitePersistence)
        assert persistence._next_seq == {}

    first = sessions[0]
    reopened = await store.open(first.id)
    complete_turn(reopened, "and again?", "Again.")
    assert await store.close(reopened)
    other = reopen(store, tmp_path)
    try:
        again = await other.open(first.id)
        assert again.derive_messages() == reopened.derive_messages()
        assert again.last_turn == 2
    finally:
        await other.aclose()


class Recording(JsonlPersistence):
    """Storage that hands each write (its events' seqs, and whether it was synced) and
    each fsync to the test as it starts: waited for, never guessed at by a clock."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writes: asyncio.Queue[tuple[list[int], bool]] = asyncio.Queue()
        self.syncs: asyncio.Queue[SessionId] = asyncio.Queue()

    async def append(
        self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
    ) -> None:
        self.writes.put_nowait(([e.seq for e in events], sync))
        await super().append(session_id, events, sync=sync)

    async def sync(self, session_id: SessionId) -> None:
        self.syncs.put_nowait(session_id)
        await super().sync(session_id)


async def next_of(queue: asyncio.Queue[T]) -> T:
    return await asyncio.wait_for(queue.get(), HANG_S)


async def test_the_writer_batches_within_its_window_and_at_boundaries(tmp_path: Path) -> None:
    # A window no test outlives: nothing but a boundary or a flush can write early.
    persistence = Recording(tmp_path)
    store = SessionStore(persistence, window=3600.0)
    session = await store.create("/w")
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", user_text("a"))
    await asyncio.sleep(0.05)  # room for a write that should not happen
    assert persistence.writes.empty()  # inside the window
    session.append("user/message", user_text("b"))
    assert await store.flush(session)  # flush does not wait for the window
    assert await next_of(persistence.writes) == ([0, 1, 2], True)
    session.append("turn/end", TurnEnd(turn=1, reason=TurnCompleted()))  # written at once
    assert (await next_of(persistence.writes))[0] == [3]
    await store.aclose()

    # The window's end writes what it gathered as one batch.
    persistence = Recording(tmp_path)
    store = SessionStore(persistence, window=0.05)
    session = await store.create("/w")
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", user_text("a"))
    assert await next_of(persistence.writes) == ([0, 1], False)
    await store.aclose()


async def test_the_writer_syncs_at_turn_ends_and_when_asked_and_never_waits_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync costs more than a step: the window and ``flush(sync=False)`` skip it,
    a plain ``flush()`` makes it, the end of a turn is followed by one, and no write
    waits for one longer than MAX_UNSYNCED_S."""
    persistence = Recording(tmp_path)
    writes, syncs = persistence.writes, persistence.syncs
    store = SessionStore(persistence, window=0.02)
    session = await store.create("/w")
    session.append("turn/start", TurnStart(turn=1))
    assert await next_of(writes) == ([0], False)  # the window's write
    session.append("step/start", StepStart(turn=1, step=1))
    assert await store.flush(session, sync=False)
    assert await next_of(writes) == ([1], False)
    assert syncs.empty()
    assert await store.flush(session)  # nothing new, but unsynced writes: an fsync alone
    assert writes.empty()
    assert await next_of(syncs) == session.id
    session.append("user/message", user_text("a"))
    assert await store.flush(session, sync=False)
    assert await next_of(writes) == ([2], False)
    monkeypatch.setattr(writer_module, "MAX_UNSYNCED_S", 0.0)  # as if a second went by
    session.append("user/message", user_text("b"))
    assert await store.flush(session, sync=False)
    assert await next_of(writes) == ([3], True)
    session.append("turn/end", TurnEnd(turn=1, reason=TurnCompleted()))
    # The end of a turn is written at once and synced right after, in the background.
    assert await next_of(writes) == ([4], False)
    assert await next_of(syncs) == session.id
    await store.aclose()
    reopened = SessionStore(JsonlPersistence(tmp_path))
    try:
        types = [e.type for e in (await reopened.open(session.id)).events]
        assert types[:5] == ["turn/start", "step/start", "user/message", "user/message", "turn/end"]
    finally:
        await reopened.aclose()


async def test_a_failed_write_is_kept_and_retried(tmp_path: Path) -> None:
    failures = [OSError(28, "No space left on device")]

    class FullDisk(JsonlPersistence):
        async def append(
            self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
        ) -> None:
            if failures:
                raise failures.pop()
            await super().append(session_id, events, sync=sync)

    store = SessionStore(FullDisk(tmp_path), window=10)
    session = await store.create("/w")
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    assert not await store.flush(session)  # the disk was full: reported, nothing lost
    assert await store.flush(session)
    await store.aclose()
    loaded = await JsonlPersistence(tmp_path).load(session.id)
    assert [e.type for e in loaded.events[:2]] == ["turn/start", "step/start"]


class FailingDisk(JsonlPersistence):
    """Appends fail while ``full`` is set, as on a full disk."""

    full = True

    async def append(
        self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
    ) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        await super().append(session_id, events, sync=sync)


async def test_followers_hear_stored_batches_in_order_and_when_writes_fail_and_recover(
    tmp_path: Path,
) -> None:
    disk = FailingDisk(tmp_path)
    store = SessionStore(disk, window=10)
    session = await store.create("/w")
    heard: list[object] = []
    stop = store.follow(
        session, written=lambda batch: heard.append([e.seq for e in batch]), failing=heard.append
    )
    session.append("turn/start", TurnStart(turn=1))
    assert not await store.flush(session)
    session.append("step/start", StepStart(turn=1, step=1))
    assert not await store.flush(session)  # a second failure in a row is no news
    assert store.stored(session) == 0
    [failing] = heard
    assert isinstance(failing, OSError)
    disk.full = False
    assert await store.flush(session)
    assert heard[1:] == [None, [0, 1]]  # working again, then what it stored
    assert store.stored(session) == 2
    stop()
    session.append("step/end", StepEnd(turn=1, step=1))
    assert await store.flush(session)
    assert len(heard) == 3  # nothing after stop()
    await store.aclose()


async def test_a_failed_write_is_retried_without_new_events_and_closing_says_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "RETRY_S", (0.01,))
    disk = FailingDisk(tmp_path)
    store = SessionStore(disk, window=10)
    session = await store.create("/w")
    recovered = asyncio.Event()
    store.follow(session, failing=lambda error: error is None and recovered.set())
    session.append("turn/start", TurnStart(turn=1))
    assert not await store.flush(session)
    disk.full = False  # the disk freed: the writer's own retry stores it, unasked
    await asyncio.wait_for(recovered.wait(), HANG_S)
    assert store.stored(session) == 1
    assert store.write_error(session) is None

    disk.full = True
    session.append("step/start", StepStart(turn=1, step=1))
    assert not await store.close(session)
    # Closed with an event it could not write: said after the writer is gone.
    assert store.stored(session) == 1
    assert isinstance(store.write_error(session), OSError)
    await store.aclose()
    loaded = await JsonlPersistence(tmp_path).load(session.id)
    assert [e.type for e in loaded.events[:1]] == ["turn/start"]


async def test_open_by_unique_prefix_and_refuse_ambiguous_ones(store: SessionStore) -> None:
    ids = []
    for n in range(2):
        session = await store.create("/w", session_id=SessionId(f"abc{n}-session"))
        complete_turn(session, "hi", "hello", with_tool=False)
        await store.close(session)
        ids.append(session.id)
    assert await store.resolve("abc1") == "abc1-session"
    assert await store.resolve("abc0-session") == "abc0-session"
    with pytest.raises(AmbiguousSessionError, match="'abc' matches 2 sessions"):
        await store.resolve("abc")
    with pytest.raises(SessionNotFoundError):
        await store.resolve("zzz")
    reopened = await store.open("abc1")
    assert reopened.id == "abc1-session"


async def test_latest_session_of_a_directory(store: SessionStore) -> None:
    for cwd, prompt in [("/a", "old in a"), ("/b", "only in b"), ("/a", "new in a")]:
        session = await store.create(cwd)
        complete_turn(session, prompt, "ok", with_tool=False)
        await store.close(session)
        await asyncio.sleep(0.002)  # distinct millisecond stamps
    latest = await store.latest("/a")
    assert latest is not None
    assert latest.first_prompt == "new in a"
    assert await store.latest("/nowhere") is None


@pytest.mark.usefixtures("bundled_vocabulary")
async def test_lone_surrogates_are_stored_indexed_and_found(
    store: SessionStore, tmp_path: Path
) -> None:
    # A folder whose name is not UTF-8 reads as lone surrogates (os.fsdecode); a title
    # or a prompt may hold half an emoji. SQLite takes only UTF-8 text.
    cwd = "/work/caf\udce9"
    session = await store.create(cwd, model="m")
    complete_turn(session, "half an emoji \ud83d here", "ok", with_tool=False)
    session.append("session/title", SessionTitle(title="caf\udce9 \ud83d", source="user"))
    await store.close(session)

    latest = await store.latest(cwd)
    assert latest is not None
    assert latest.id == session.id
    assert (latest.cwd, latest.title) == ("/work/caf\\udce9", "caf\\udce9 \\ud83d")
    assert latest.first_prompt == "half an emoji \\ud83d here"
    catalog = store.catalog
    assert catalog is not None
    assert [h.session_id for h in await catalog.search("emoji", cwd=cwd)] == [session.id]
    assert await store.latest("/work/caf\udce8") is None

    other = reopen(store, tmp_path)
    try:
        reopened = await other.open(session.id)
        assert reopened.header == session.header
        assert [e.to_dict() for e in reopened.events[: len(session.events)]] == [
            e.to_dict() for e in session.events
        ]
    finally:
        await other.aclose()


async def test_fork_copies_the_history_and_records_its_origin(
    store: SessionStore, tmp_path: Path
) -> None:
    source = await store.create("/w", model="deepseek-v4-pro")
    complete_turn(source, "first", "one", with_tool=False)
    boundary = len(source.events) - 1
    complete_turn(source, "second", "two", with_tool=False)
    await store.close(source)

    fork = await store.fork(source.id[:8], boundary)
    assert fork.header.parent_session == source.id
    assert fork.header.origin == "fork"
    assert fork.header.seed_length == boundary + 1
    assert fork.first_live_seq == boundary + 1
    assert [m.text() for m in fork.derive_messages()] == ["first", "one "]
    complete_turn(fork, "another path", "different", with_tool=False)
    await store.close(fork)

    other = reopen(store, tmp_path)
    try:
        reread = await other.open(fork.id)
        assert check_log(reread.events) == []
        assert [m.text() for m in reread.derive_messages()] == [
            "first",
            "one ",
            "another path",
            "different ",
        ]
        original = await other.open(source.id)
        assert len(original.derive_messages()) == 4  # untouched by the fork
    finally:
        await other.aclose()


async def test_fork_refuses_a_point_inside_a_turn(store: SessionStore) -> None:
    source = await store.create("/w")
    complete_turn(source, "first", "one", with_tool=False)
    await store.close(source)
    with pytest.raises(ForkError, match="inside an unfinished turn"):
        await store.fork(source.id, 2)
    with pytest.raises(ForkError, match="not in session"):
        await store.fork(source.id, 999)


async def test_a_session_has_one_writer_at_a_time(store: SessionStore, tmp_path: Path) -> None:
    session = await store.create("/w")
    complete_turn(session, "hello", "hi", with_tool=False)
    assert await store.flush(session)
    other = SessionStore.at(tmp_path, store.persistence.name)  # type: ignore[arg-type]
    try:
        with pytest.raises(SessionBusyError) as caught:
            await other.open(session.id)
        assert caught.value.holder is not None
        assert caught.value.holder.pid == os.getpid()
        assert f"pid {os.getpid()}" in str(caught.value)
        assert "--fork-session" in str(caught.value)
        assert "--wait" in str(caught.value)
        with pytest.raises(SessionBusyError):
            await other.delete(session.id)
        # Reading it, and forking it, need no lock.
        forked = await other.fork(session.id)
        assert forked.id != session.id
        # --wait: opened as soon as the writer closes it.
        waiting = asyncio.ensure_future(other.open(session.id, wait=True))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await store.close(session)
        reopened = await asyncio.wait_for(waiting, 10)
        assert reopened.last_turn == 1
    finally:
        await other.aclose()


async def test_opening_a_crashed_session_closes_its_turn_and_reports_it(
    store: SessionStore, tmp_path: Path
) -> None:
    session = await store.create("/w")
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    await store.flush(session)
    # The process dies here: nothing closes the turn.
    other = reopen(store, tmp_path)
    try:
        reopened = await other.open(session.id)
        assert [i.kind for i in reopened.load_issues] == ["interrupted-turn"]
        assert reopened.open_turn is None
        complete_turn(reopened, "again", "fine", with_tool=False)
        assert reopened.last_turn == 2
        assert check_log(reopened.events) == []
    finally:
        await other.aclose()


async def test_delete_removes_storage_and_index(store: SessionStore) -> None:
    session = await store.create("/w")
    complete_turn(session, "secret plan", "ok", with_tool=False)
    await store.close(session)
    assert store.catalog is not None
    assert await store.catalog.search("secret") != []
    assert await store.delete(session.id[:6]) == session.id
    assert await store.catalog.search("secret") == []
    with pytest.raises(SessionNotFoundError):
        await store.open(session.id)


# ---------------------------------------------------------------------- catalog


@pytest.mark.usefixtures("bundled_vocabulary")
async def test_the_catalog_lists_totals_titles_and_cost(tmp_path: Path) -> None:
    def pricing(provider: str, model: str, usage: TokenUsage, at: object) -> float:
        return (
            usage.input_tokens * 1e-6 + usage.cache_read_tokens * 1e-7 + usage.output_tokens * 2e-6
        )  # type: ignore[operator]

    store = SessionStore(make_persistence("jsonl", tmp_path), Catalog(tmp_path, pricing=pricing))
    session = await store.create("/w")
    complete_turn(session, "fix the flaky test", "Done.")
    session.append("session/title", SessionTitle(title="Fix flaky test", source="provider"))
    await store.close(session)
    assert store.catalog is not None
    [entry] = await store.catalog.list(cwd="/w")
    assert entry.title == "Fix flaky test"
    assert entry.display_title == "Fix flaky test"
    assert entry.first_prompt == "fix the flaky test"
    assert entry.turns == 1
    assert (entry.input_tokens, entry.output_tokens, entry.cache_read_tokens) == (200, 40, 800)
    assert entry.cost == pytest.approx(2 * (100e-6 + 400e-7 + 20 * 2e-6))
    assert entry.last_seq == len(session.events) - 1
    assert entry.updated_at >= entry.created_at
    await store.aclose()


async def test_search_finds_sessions_by_what_was_said(store: SessionStore) -> None:
    first = await store.create("/a")
    complete_turn(
        first, "why does the parser choke on tabs?", "Tabs are not stripped.", with_tool=False
    )
    second = await store.create("/b")
    complete_turn(second, "add a CHANGELOG entry", "Added under Unreleased.", with_tool=False)
    for session in (first, second):
        await store.close(session)
    catalog = store.catalog
    assert catalog is not None
    hits = await catalog.search("parser tabs")
    assert [(h.session_id, h.type) for h in hits] == [(first.id, "user/message")]
    assert "[parser]" in hits[0].snippet
    assert {h.session_id for h in await catalog.search("stripped")} == {first.id}
    assert {h.session_id for h in await catalog.search("unrel")} == {second.id}  # prefix
    assert await catalog.search("changelog", cwd="/a") == []
    assert await catalog.search('"quotes" AND (weird) NEAR stuff*') == []  # never FTS syntax
    assert await catalog.search("   ") == []
    # Reasoning and streamed chunks are not indexed, only what was said.
    assert await catalog.search("should look") == []


async def test_the_catalog_rebuilds_from_storage_and_catches_up(tmp_path: Path) -> None:
    store = SessionStore.at(tmp_path)
    session = await store.create("/w")
    complete_turn(session, "remember the milk", "Noted.", with_tool=False)
    await store.close(session)
    assert store.catalog is not None
    await store.catalog.forget(session.id)  # as if the index were lost
    assert await store.catalog.list() == []
    assert await store.catalog.rebuild([store.persistence]) == 1
    [entry] = await store.catalog.list()
    assert entry.first_prompt == "remember the milk"
    assert [h.session_id for h in await store.catalog.search("milk")] == [session.id]

    # Events stored but never indexed (a crash between the two) are caught up on open.
    await store.catalog.forget(session.id)
    reopened = await store.open(session.id)
    assert [h.session_id for h in await store.catalog.search("milk")] == [session.id]
    await store.close(reopened)
    await store.aclose()


async def test_opening_a_session_missing_from_the_catalog_indexes_it_once(tmp_path: Path) -> None:
    # A crash between the storage write and the catalog write leaves this state; the
    # new writer's first batch must not race the catch-up (found by the SIGKILL test).
    bare = SessionStore(make_persistence("jsonl", tmp_path), catalog=None)
    session = await bare.create("/proj")
    complete_turn(session, "indexed later", "ok", with_tool=False)
    await bare.aclose()
    store = SessionStore(make_persistence("jsonl", tmp_path), Catalog(tmp_path), window=0.0)
    reopened = await store.open(session.id)
    await store.close(reopened)
    assert store.catalog is not None
    [entry] = await store.catalog.list()
    assert entry.turns == 1
    assert entry.last_seq == len(reopened.events) - 1
    assert len(await store.catalog.search("indexed later")) == 1
    await store.aclose()


async def test_batches_written_back_to_back_are_all_indexed_in_order(tmp_path: Path) -> None:
    store = SessionStore.at(tmp_path)
    session = await store.create("/w")
    for turn in range(1, 51):
        session.append("turn/start", TurnStart(turn=turn))  # each a batch of its own
        session.append("turn/end", TurnEnd(turn=turn, reason=TurnCompleted()))
        await asyncio.sleep(0)
    await store.close(session)
    assert store.catalog is not None
    [entry] = await store.catalog.list()
    assert (entry.turns, entry.last_seq) == (50, 99)
    await store.aclose()
