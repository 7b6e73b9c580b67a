"""The ``sessions`` service: live sessions backed by storage and indexed in the catalog.

Creating a session writes nothing until its first event; every event then reaches
storage through the session's writer, and the catalog after that. An agent sees the
storage of its session as one :class:`SessionSink` (:meth:`SessionStore.sink`); a
front end follows it (:meth:`SessionStore.follow`: each batch once stored, writes
failing and succeeding again), so that it reports as stored only what is. Opening a
stored session repairs crash damage first (reporting it on ``session.load_issues``),
and brings the catalog up to date if it fell behind. The catalog is derived: what it
misses is indexed, and what it lists that storage no longer holds is dropped, as it
is looked at (:meth:`SessionStore.index_missing`); opening a session by its full id
never needs it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from dsh.bulk import collector_paused
from dsh.host import HostFacts
from dsh.kernel import ServiceKey
from dsh.llm import SessionId, new_session_id
from dsh.session.blobs import Blobs, is_digest
from dsh.session.catalog import Catalog, CatalogEntry
from dsh.session.events import SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.indexing import IndexDifferences as IndexDifferences
from dsh.session.indexing import SessionIndexer
from dsh.session.jsonl import JsonlPersistence
from dsh.session.lock import SessionLocks
from dsh.session.payloads import SessionMoved
from dsh.session.persistence import SessionNotFoundError, SessionPersistence
from dsh.session.repair import closing_events
from dsh.session.session import Session, now_ms
from dsh.session.spend import Pricing, Spend, session_spend
from dsh.session.sqlite import SqlitePersistence
from dsh.session.turns import TurnNotFoundError, find_turn, turns_of
from dsh.session.writer import BOUNDARY_TYPES, SessionWriter
from dsh.settings_tables import Backend as Backend

_log = logging.getLogger("dsh.session")

SNAPSHOT_EVERY = 1_000
"""How many events a session's log grows by between the snapshots its turn ends
write. A snapshot costs in proportion to the whole log (its line index, the seqs of
every kind of event): one at every turn's end would make each turn cost more as the
session grows (7 ms of CPU at 100,000 events). A resume reads at most about this many
events past the last one; closing a session always writes one."""


class AmbiguousSessionError(LookupError):
    def __init__(self, prefix: str, matches: Sequence[str]) -> None:
        shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        super().__init__(f"{prefix!r} matches {len(matches)} sessions: {shown}")
        self.prefix = prefix
        self.matches = list(matches)


class ForkError(ValueError):
    """The fork point is not a place a session can continue from."""


def blobs_beside(export: Path | str) -> Path:
    """Where an exported log's blobs go: ``FILE.blobs/`` beside ``FILE``."""
    path = Path(export)
    return path.with_name(path.name + ".blobs")


def copy_blobs(source: Path, target: Path) -> None:
    """Copy every blob of ``source`` whose bytes match its name into ``target``."""
    if not source.is_dir():
        return
    blobs = Blobs(target)
    for path in source.iterdir():
        if is_digest(path.name):
            data = Blobs(source).get(path.name)
            if data is not None:
                blobs.put(data)


def make_persistence(backend: Backend, home: Path) -> SessionPersistence:
    match backend:
        case "jsonl":
            return JsonlPersistence(home)
        case "sqlite":
            return SqlitePersistence(home)


class SessionSink(Protocol):
    """Where a live session's events are stored, as the agent loop drives it: it asks
    for a write early (before a model request), waits for one where it must (before a
    tool call with effects, at the end of a turn), and stops when writes fail."""

    async def flush(self, *, sync: bool = True) -> bool:
        """Store every event appended so far: synced to disk, or with ``sync=False``
        safe from the process dying. False if the write failed (it is kept and retried
        at the next flush)."""
        ...

    def write_soon(self) -> None:
        """Start storing the events so far, without waiting."""
        ...

    def write_error(self) -> BaseException | None:
        """Why the last write failed, while its events wait to be written."""
        ...

    def stored(self) -> int:
        """How many of the session's events storage holds (0: the session is not
        stored at all, and there is nothing to resume)."""
        ...


StoredBatch = Callable[[Sequence[SessionEvent]], None]
"""Told each batch of a session's events once storage holds it, in order."""
Failing = Callable[[BaseException | None], None]
"""Told when a session's writes start failing (the error), and when they succeed
again (None)."""


@dataclass(frozen=True, eq=False)
class _Follower:
    written: StoredBatch | None
    failing: Failing | None


@dataclass(frozen=True)
class _Left:
    """What storage holds of a session this store closed with events it could not
    write: how many, and why not."""

    stored: int
    error: BaseException | None


class SessionStore:
    def __init__(
        self,
        persistence: SessionPersistence,
        catalog: Catalog | None = None,
        *,
        window: float = 0.2,
        locks: SessionLocks | None = None,
        pricing: Pricing | None = None,
        host: HostFacts | None = None,
    ) -> None:
        self.persistence = persistence
        self.host = host
        """The machine facts each new session's header records."""
        self.catalog = catalog
        self.pricing = pricing
        """What a model call cost, for the totals this store keeps of each session."""
        self._spent: dict[SessionId, Spend] = {}
        """What each open session's stored events paid for, kept as they are stored,
        so a snapshot can hold it (:meth:`spent`)."""
        self.locks = locks
        """One writer per session: the sessions this store writes are locked (see
        :mod:`dsh.session.lock`); None for a store only tests write."""
        self._window = window
        self._writers: dict[SessionId, SessionWriter] = {}
        self._indexer = SessionIndexer(persistence, catalog)
        """Keeps the catalog up to date with what is stored (see :mod:`dsh.session.indexing`)."""
        self._followers: dict[SessionId, list[_Follower]] = {}
        self._left: dict[SessionId, _Left] = {}
        """Sessions closed with events left unstored (rare: a failing disk)."""
        self._snapshots: dict[SessionId, asyncio.Task[None]] = {}
        """The snapshot being written of each session (one at a time)."""
        self._severed: set[SessionId] = set()
        """Open sessions nothing more is stored of (:meth:`sever`)."""
        self.snapshot_every = SNAPSHOT_EVERY
        """See :data:`SNAPSHOT_EVERY` (a test may take one at every turn's end: 0)."""
        self._snapshot_at: dict[SessionId, int] = {}
        """How many events each open session's latest snapshot covers."""

    @classmethod
    def at(
        cls,
        home: Path,
        backend: Backend = "jsonl",
        *,
        pricing: Pricing | None = None,
        host: HostFacts | None = None,
    ) -> SessionStore:
        return cls(
            make_persistence(backend, home),
            Catalog(home, pricing=pricing),
            locks=SessionLocks(home / "locks"),
            pricing=pricing,
            host=host,
        )

    # ------------------------------------------------------------------ live sessions

    async def create(
        self,
        cwd: str | None,
        *,
        model: str | None = None,
        seed: Sequence[SessionEvent] = (),
        parent: SessionId | None = None,
        origin: Literal["fork", "subagent"] | None = None,
        session_id: SessionId | None = None,
        delegation_depth: int = 0,
        agent_preset: str | None = None,
    ) -> Session:
        header = SessionHeader(
            id=session_id or new_session_id(),
            created_at=now_ms(),
            cwd=cwd,
            model=model,
            parent_session=parent,
            seed_length=len(seed) if parent is not None else None,
            origin=origin,
            delegation_depth=delegation_depth,
            agent_preset=agent_preset,
            host=self.host,
        )
        if self.locks is not None:
            self.locks.acquire(header.id)
        try:
            await self.persistence.create(header)
        except BaseException:
            self._release(header.id)
            raise
        session = Session(header, seed)
        self._spent[session.id] = Spend()
        self._indexer.never_indexed.add(session.id)
        self._attach(session, stored=0)
        return session

    async def open(self, session_id: str, *, wait: bool = False) -> Session:
        """Open a stored session (by id or unique id prefix) to continue it: this store
        becomes its one writer. Raises :class:`SessionBusyError` when another process
        writes it, or with ``wait`` waits until that process lets it go."""
        resolved = await self.resolve(session_id)
        if self.locks is not None:
            await self.locks.acquire_waiting(resolved, wait=wait)
        try:
            session = await self._resume_fast(resolved)
            if session is not None:
                return session
            loaded = await self.persistence.load(resolved)
        except BaseException:
            self._release(resolved)
            raise
        for issue in loaded.issues:
            _log.warning("%s", issue)
        # Index what storage holds before the session's writer can index anything newer.
        await self.indexed()
        await self._indexer.catch_up(loaded.header, loaded.events)
        with collector_paused():  # the live views of every event: see dsh.bulk
            session = Session(loaded.header, loaded.events)
        session.load_issues = tuple(loaded.issues)
        self._spent[session.id] = session_spend(loaded.events, self.pricing)
        self._attach(session, stored=len(loaded.events))
        return session

    async def _resume_fast(self, session_id: SessionId) -> Session | None:
        """The session through its snapshot (see :mod:`dsh.session.snapshot`): the
        older events stay in the file until something reads them. None when it has
        none that fits, or the events after it leave a turn open (a crash to repair:
        the full read does it)."""
        persistence = self.persistence
        if not isinstance(persistence, JsonlPersistence):
            return None
        resumed = await persistence.open_fast(session_id)
        if resumed is None:
            return None
        stored = len(resumed.log)
        tail = list(resumed.log.recent)
        try:
            spent = Spend.from_json(resumed.state["spend"])
            with collector_paused():
                session = Session.resumed(resumed.header, resumed.state, resumed.log)
        except (ValueError, KeyError, OSError) as error:
            _log.info("session %s: snapshot not used (%s); read whole", session_id, error)
            session = None
        if session is None or session.open_turn is not None:
            persistence.forget(session_id)
            return None
        for event in tail:
            spent.count(event, self.pricing)
        self._spent[session.id] = spent
        self._snapshot_at[session.id] = int(resumed.state["next"])
        await self.indexed()
        await self._indexer.catch_up_log(session.header, session.events, stored)
        self._attach(session, stored=stored)
        return session

    async def fork(
        self,
        source_id: str,
        at_seq: int | None = None,
        *,
        cwd: str | None = None,
        at_turn: int | None = None,
    ) -> Session:
        """A new session continuing from ``source_id``'s events up to ``at_seq`` or
        through the end of turn ``at_turn`` (by default its last finished turn:
        another process may be in the middle of one), in ``cwd`` (None: the source's
        folder; when another, ``session/moved`` says which the source's was). The
        source is only read. A turn a rewind took back can be forked at: the fork holds
        the conversation as it was at that turn's end."""
        if at_seq is not None and at_turn is not None:
            raise ValueError("fork at a seq or at a turn, not both")
        resolved = await self.resolve(source_id)
        loaded = await self.persistence.inspect(resolved)
        events = loaded.events
        if self.locks is not None and self.locks.busy(resolved):
            # The turn its writer has open is not interrupted, only unfinished.
            events = events[: len(events) - len(loaded.repaired)]
        boundary = len(events) - 1 if at_seq is None else at_seq
        if at_turn is not None:
            boundary = _turn_end(resolved, events, at_turn)
        elif at_seq is None and closing_events(events):
            ends = [e.seq for e in events if e.type == "turn/end"]
            if not ends:
                raise ForkError(f"session {resolved} has no finished turn to continue from yet")
            boundary = ends[-1]
        if not 0 <= boundary < len(events):
            raise ForkError(f"seq {boundary} is not in session {resolved} (0..{len(events) - 1})")
        seed = events[: boundary + 1]
        if closing_events(seed):
            raise ForkError(
                f"seq {boundary} is inside an unfinished turn; fork at or after its turn/end"
            )
        forked = await self.create(
            cwd if cwd is not None else loaded.header.cwd,
            model=loaded.header.model,
            seed=seed,
            parent=resolved,
            origin="fork",
        )
        if cwd is not None and loaded.header.cwd is not None and loaded.header.cwd != cwd:
            forked.append("session/moved", SessionMoved(stored=loaded.header.cwd, cwd=cwd))
        # The copied events refer to blobs by digest; the fork gets its own copies.
        source = self.persistence.blob_dir(loaded.header)
        target = self.persistence.blob_dir(forked.header)
        await asyncio.to_thread(copy_blobs, source, target)
        return forked

    def _attach(self, session: Session, *, stored: int) -> None:
        self._left.pop(session.id, None)
        self._writers[session.id] = SessionWriter(
            session,
            self.persistence,
            stored=stored,
            window=self._window,
            on_written=self._written,
            on_failing=self._failing,
        )

    def follow(
        self,
        session: Session,
        *,
        written: StoredBatch | None = None,
        failing: Failing | None = None,
    ) -> Callable[[], None]:
        """Hear of ``session``'s storage from now on: ``written(events)`` with each
        batch once storage holds it (it survives the process being killed from then
        on), in order; ``failing(error)`` when its writes start failing, and
        ``failing(None)`` when they succeed again. What was stored before is
        ``session.events[:stored(session)]``. Returns the function that stops it."""
        follower = _Follower(written, failing)
        self._followers.setdefault(session.id, []).append(follower)

        def stop() -> None:
            followers = self._followers.get(session.id, [])
            if follower in followers:
                followers.remove(follower)
            if not followers:
                self._followers.pop(session.id, None)

        return stop

    def _failing(self, session: Session, error: BaseException | None) -> None:
        for follower in list(self._followers.get(session.id, ())):
            if follower.failing is not None:
                try:
                    follower.failing(error)
                except Exception:
                    _log.exception("session %s: a storage follower failed", session.id)

    async def _written(self, session: Session, events: Sequence[SessionEvent]) -> None:
        # The followers first: they report to people what is stored, in order.
        for follower in list(self._followers.get(session.id, ())):
            if follower.written is not None:
                try:
                    follower.written(events)
                except Exception:
                    _log.exception("session %s: a storage follower failed", session.id)
        spent = self._spent.get(session.id)
        if spent is not None:
            for event in events:
                spent.count(event, self.pricing)
        if events and events[-1].type in BOUNDARY_TYPES:
            self._snapshot_soon(session)
        self._indexer.queue(session.header, events)

    def spent(self, session: Session) -> tuple[Spend, int] | None:
        """What the session's stored events paid for, and how many events that is
        (the first ones): a copy, for a view that starts from it rather than from
        every event (None for a session this store does not have open)."""
        spent, writer = self._spent.get(session.id), self._writers.get(session.id)
        if spent is None or writer is None:
            return None
        return copy.deepcopy(spent), writer.stored

    def _snapshot_soon(self, session: Session, *, closing: bool = False) -> None:
        """Write what the session derives from its stored log beside it, off the loop,
        so that resuming it reads only what follows (JSONL logs only): when it closes,
        and at a turn's end once the log grew by :attr:`snapshot_every` events."""
        persistence = self.persistence
        if not isinstance(persistence, JsonlPersistence) or session.open_turn is not None:
            return
        if session.id in self._severed:
            return  # it derives from events the log will never hold
        covered = self._snapshot_at.get(session.id, 0)
        if not closing and len(session.events) - covered < self.snapshot_every:
            return
        spent = self._spent.get(session.id)
        previous = self._snapshots.get(session.id)
        if spent is None or (previous is not None and not previous.done()):
            return  # the next turn's end writes a newer one
        state = {**session.derived_state(), "spend": spent.to_json()}
        write = persistence.snapshot(session.id, state)
        if write is None:
            return
        self._snapshot_at[session.id] = state["next"]
        self._snapshots[session.id] = asyncio.get_running_loop().create_task(
            self._write_snapshot(session.id, write)
        )

    async def _write_snapshot(self, session_id: SessionId, write: Callable[[], None]) -> None:
        try:
            await asyncio.to_thread(write)
        except OSError as error:  # only derived: the next resume reads the whole log
            _log.warning("session %s: no snapshot written (%s)", session_id, error)
        except Exception:  # a bug here must not fail the session's close
            _log.exception("session %s: no snapshot written", session_id)

    async def _snapshot_written(self, session_id: SessionId) -> None:
        task = self._snapshots.pop(session_id, None)
        if task is not None:
            await task

    async def flush(self, session: Session, *, sync: bool = True) -> bool:
        """Store every event appended so far: synced to disk, or with ``sync=False``
        safe from the process dying (see :mod:`dsh.session.writer`). False if the write
        failed (it is kept and retried at the next flush)."""
        writer = self._writers.get(session.id)
        return await writer.flush(sync=sync) if writer is not None else True

    def write_error(self, session: Session) -> BaseException | None:
        """Why the session's last write failed, while its events wait to be written
        (for a session this store closed, why what was left could not be)."""
        writer = self._writers.get(session.id)
        if writer is not None:
            return writer.error
        left = self._left.get(session.id)
        return left.error if left is not None else None

    def stored(self, session: Session) -> int:
        """How many of ``session``'s events storage holds, as far as this store wrote
        them (0: nothing, not even the session itself). Known for a session it has open
        or has closed."""
        writer = self._writers.get(session.id)
        if writer is not None:
            return writer.stored
        left = self._left.get(session.id)
        return left.stored if left is not None else len(session.events)

    def write_soon(self, session: Session) -> None:
        """Start storing what ``session`` appended so far; the writer owns the write."""
        writer = self._writers.get(session.id)
        if writer is not None:
            writer.write_soon()

    def blobs(self, session_id: str) -> Blobs | None:
        """The blob folder of a session this store has open; None for any other."""
        writer = self._writers.get(SessionId(session_id))
        if writer is None:
            return None
        return Blobs(self.persistence.blob_dir(writer.session.header))

    def log_path(self, session: Session) -> Path:
        """The file ``session``'s events are written to, for a program that reads them
        (a user's hook): its JSONL log, or with the SQLite backend the database that
        holds every session (its rows carry the session's id)."""
        return self.persistence.log_path(session.header)

    def sink(self, session: Session) -> SessionSink:
        """``session``'s storage in this store, as one object for its agent."""
        return _StoreSink(self, session)

    def sever(self, session: Session) -> None:
        """Store nothing ``session`` appends from now on, nor a snapshot of it: its log
        ends where a process killed at this moment leaves it (what was appended so far
        is written, as the kernel keeps a killed process's writes). A replay stops a
        session there where its recording was killed; it is closed as any other."""
        writer = self._writers.get(session.id)
        if writer is not None:
            writer.stop_following()
            writer.write_soon()
        self._severed.add(session.id)

    async def close(self, session: Session) -> bool:
        """Write what is queued, stop following the session, and index it. False when
        some of it could not be written (:meth:`stored` and :meth:`write_error` say
        what and why)."""
        written = await self._close_writer(session.id)
        await self._snapshot_written(session.id)
        if written and session.id not in self._severed:
            self._snapshot_soon(session, closing=True)
            await self._snapshot_written(session.id)
        self._severed.discard(session.id)
        self._snapshot_at.pop(session.id, None)
        self._spent.pop(session.id, None)
        self._release(session.id)
        await self.indexed()
        # Last: the snapshot and the index above read the backend's line index.
        self.persistence.forget(session.id)
        return written

    async def _close_writer(self, session_id: SessionId) -> bool:
        writer = self._writers.get(session_id)
        if writer is None:
            return True
        written = await writer.close()
        del self._writers[session_id]
        self._followers.pop(session_id, None)
        if writer.stored < len(writer.session.events) and session_id not in self._severed:
            self._left[session_id] = _Left(writer.stored, writer.error)
        return written

    def _release(self, session_id: str) -> None:
        if self.locks is not None:
            self.locks.release(session_id)

    async def aclose(self) -> None:
        for session_id in list(self._writers):
            await self._close_writer(session_id)
        for session_id in list(self._snapshots):
            await self._snapshot_written(session_id)
        if self.locks is not None:
            self.locks.release_all()
        await self._indexer.aclose()
        await self.persistence.close()
        if self.catalog is not None:
            await self.catalog.close()

    # ------------------------------------------------------------------ stored sessions

    async def resolve(self, id_or_prefix: str) -> SessionId:
        """The one stored session whose id is, or starts with, ``id_or_prefix``. A full
        id is looked up in storage alone; a prefix in the catalog, brought up to date
        first when it finds none, several, or one whose log is gone."""
        if not id_or_prefix:
            raise SessionNotFoundError(id_or_prefix)
        if await self.persistence.exists(SessionId(id_or_prefix)):
            return SessionId(id_or_prefix)
        if self.catalog is not None:
            matches = await self.catalog.ids_starting_with(id_or_prefix)
            if len(matches) != 1 or not await self._still_stored(matches[0]):
                await self.index_missing()
                matches = await self.catalog.ids_starting_with(id_or_prefix)
        else:
            matches = [h.id for h in await self.persistence.list() if h.id.startswith(id_or_prefix)]
        if not matches:
            raise SessionNotFoundError(id_or_prefix)
        if len(matches) > 1:
            raise AmbiguousSessionError(id_or_prefix, matches)
        return SessionId(matches[0])

    async def _still_stored(self, session_id: str) -> bool:
        """Whether the catalog's entry for ``session_id`` still has its log (one of
        another backend's is taken on trust)."""
        assert self.catalog is not None
        entry = await self.catalog.get(session_id)
        if entry is None or entry.backend != self.persistence.name:
            return True
        return await self.persistence.exists(SessionId(session_id))

    async def latest(self, cwd: str) -> CatalogEntry | None:
        """The most recently updated session of ``cwd``."""
        if self.catalog is None:
            return None
        await self.index_missing(cwd)
        found = await self.catalog.list(cwd=cwd, limit=1)
        return found[0] if found else None

    async def indexed(self) -> None:
        """Return once every stored batch so far is in the catalog."""
        await self._indexer.indexed()

    async def index_differences(self, cwd: str | None = None) -> IndexDifferences:
        """Where the catalog and storage disagree (about ``cwd``'s sessions, when given)."""
        return await self._indexer.differences(cwd)

    async def index_missing(
        self, cwd: str | None = None, differences: IndexDifferences | None = None
    ) -> int:
        """Bring the catalog up to date with storage (see
        :meth:`SessionIndexer.index_missing`); how many entries changed."""
        return await self._indexer.index_missing(cwd, differences)

    async def delete(self, id_or_prefix: str) -> SessionId:
        resolved = await self.resolve(id_or_prefix)
        await self._close_writer(resolved)
        await self._snapshot_written(resolved)
        self._snapshot_at.pop(resolved, None)
        self._spent.pop(resolved, None)
        self._left.pop(resolved, None)
        if self.locks is not None:
            self.locks.acquire(resolved)  # not from under another process writing it
        try:
            await self.indexed()
            await self.persistence.delete(resolved)
            if self.catalog is not None:
                await self.catalog.forget(resolved)
        finally:
            self._release(resolved)
        return resolved


def _turn_end(session_id: str, events: Sequence[SessionEvent], turn: int) -> int:
    """The seq of turn ``turn``'s ``turn/end`` in ``events``; ForkError says why not."""
    try:
        info = find_turn(turns_of(events), turn)
    except TurnNotFoundError as error:
        raise ForkError(f"cannot fork session {session_id} at turn {turn}: {error}") from None
    if info.end_seq is None:
        raise ForkError(
            f"turn {turn} of session {session_id} has not ended yet; fork at an earlier turn"
        )
    return info.end_seq


@dataclass(frozen=True)
class _StoreSink:
    """A :class:`SessionSink` over the store's writer for one session (none once the
    session is closed: then nothing waits to be written)."""

    store: SessionStore
    session: Session

    async def flush(self, *, sync: bool = True) -> bool:
        return await self.store.flush(self.session, sync=sync)

    def write_soon(self) -> None:
        self.store.write_soon(self.session)

    def write_error(self) -> BaseException | None:
        return self.store.write_error(self.session)

    def stored(self) -> int:
        return self.store.stored(self.session)


SESSIONS: ServiceKey[SessionStore] = ServiceKey("sessions")
"""Stored sessions: create, open, fork, the catalog."""
