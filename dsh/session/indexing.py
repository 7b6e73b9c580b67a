"""Keeping the session catalog (``index.sqlite``) up to date with storage.

Stored batches reach the catalog through one ordered queue, off the path of a flush: a
flush waits for the disk, not for the index. The indexer lets batches gather for a
moment (:data:`INDEX_DELAY_S`) so a busy turn costs one commit a second rather than
one a step; whoever waits for the index cuts it short. A session's first batch is
indexed at once, so ``--continue`` finds a new session as soon as possible. What the
catalog lacks after a crash (a session stored but never indexed, an entry whose log is
gone) is found by comparing the two (:meth:`SessionIndexer.index_missing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from dsh.llm import SessionId
from dsh.session.catalog import Catalog, stored_events
from dsh.session.events import SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.persistence import PersistenceError, SessionPersistence

__all__ = ["INDEX_DELAY_S", "IndexDifferences", "SessionIndexer"]

_log = logging.getLogger("dsh.session")

INDEX_DELAY_S = 1.0


@dataclass(frozen=True)
class IndexDifferences:
    """Where the catalog and this store's storage disagree."""

    missing: list[SessionHeader]
    """Stored sessions the catalog does not know."""
    vanished: list[str]
    """Sessions of this store's backend the catalog lists but storage no longer holds
    (their log was deleted, emptied, or cannot be read)."""


class SessionIndexer:
    """The catalog's writer for one store: see the module docstring."""

    def __init__(self, persistence: SessionPersistence, catalog: Catalog | None) -> None:
        self.persistence = persistence
        self.catalog = catalog
        self._queue: asyncio.Queue[tuple[SessionHeader, list[SessionEvent]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._now = asyncio.Event()
        self._waiters = 0
        self.never_indexed: set[SessionId] = set()
        """Sessions whose first batch is queued: indexed at once, not after the delay."""

    def queue(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Index ``events`` of the session ``header`` names, soon."""
        if self.catalog is None:
            return
        self._queue.put_nowait((header, list(events)))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def aclose(self) -> None:
        await self.indexed()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        assert self.catalog is not None
        while True:
            waiting = [await self._queue.get()]
            if waiting[0][0].id in self.never_indexed:
                self.never_indexed.discard(waiting[0][0].id)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._now.wait(), INDEX_DELAY_S)
            while not self._queue.empty():  # whatever queued up meanwhile
                waiting.append(self._queue.get_nowait())
            # Consecutive batches of one session go to the index in one commit.
            runs: list[tuple[SessionHeader, list[SessionEvent]]] = []
            for header, events in waiting:
                if runs and runs[-1][0].id == header.id:
                    runs[-1][1].extend(events)
                else:
                    runs.append((header, list(events)))
            for header, events in runs:
                try:
                    recorded = await self.catalog.record(
                        header,
                        events,
                        backend=self.persistence.name,
                        location=self.persistence.location(header.id),
                    )
                    if not recorded:  # the index lacks what came before: all of it, then
                        await self.index_whole(header.id)
                except (OSError, sqlite3.Error, PersistenceError) as error:
                    # A full disk, a locked index, a log that cannot be read again: said
                    # in one line, since the log itself is unaffected and the index can
                    # be rebuilt.
                    _log.error(
                        "session %s: indexing failed (%s); dsh sessions reindex repairs it",
                        header.id,
                        error,
                    )
                except Exception:
                    _log.exception(
                        "session %s: indexing failed (dsh sessions reindex repairs it)", header.id
                    )
            for _ in waiting:
                self._queue.task_done()

    async def indexed(self) -> None:
        """Return once every stored batch so far is in the catalog."""
        self._waiters += 1
        self._now.set()
        try:
            await self._queue.join()
        finally:
            self._waiters -= 1
            if not self._waiters:
                self._now.clear()

    async def catch_up(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        if self.catalog is None or not events:
            return
        try:
            entry = await self.catalog.get(header.id)
            if entry is None or entry.last_seq < events[-1].seq:
                await self.catalog.record(
                    header,
                    events,
                    backend=self.persistence.name,
                    location=self.persistence.location(header.id),
                )
        except (OSError, sqlite3.Error) as error:
            # The session opens without its index entry: the index is only derived.
            _log.warning("session %s: not indexed (%s)", header.id, error)

    async def catch_up_log(
        self, header: SessionHeader, events: Sequence[SessionEvent], stored: int
    ) -> None:
        """:meth:`catch_up` for a log read through its snapshot: only what the catalog
        lacks is read (all of it only when the catalog knows nothing of the session)."""
        if self.catalog is None or not stored:
            return
        try:
            entry = await self.catalog.get(header.id)
            since = -1 if entry is None else entry.last_seq
            if since < stored - 1:
                await self.catalog.record(
                    header,
                    events[since + 1 : stored],
                    backend=self.persistence.name,
                    location=self.persistence.location(header.id),
                )
        except (OSError, sqlite3.Error) as error:
            _log.warning("session %s: not indexed (%s)", header.id, error)

    async def differences(self, cwd: str | None = None) -> IndexDifferences:
        """Where the catalog and storage disagree (about ``cwd``'s sessions, when given)."""
        await self.indexed()
        if self.catalog is None:
            return IndexDifferences([], [])
        # The index first: a session stored meanwhile is then at worst indexed twice
        # (harmless), never taken for one whose log is gone.
        known = await self.catalog.ids(cwd=cwd)
        mine = await self.catalog.ids(cwd=cwd, backend=self.persistence.name)
        stored = await self.persistence.list(cwd)
        ids = {header.id for header in stored}
        return IndexDifferences([h for h in stored if h.id not in known], sorted(mine - ids))

    async def index_missing(
        self, cwd: str | None = None, differences: IndexDifferences | None = None
    ) -> int:
        """Bring the catalog up to date with storage (about ``cwd``'s sessions, when
        given): index the stored sessions it does not know, and drop the ones whose
        log is gone, saying so in one line. A process killed between a session's
        first write and its index entry leaves one unknown; so a session is found
        (``--continue``, ``--resume`` by prefix, ``dsh sessions list``) once its first
        event is stored, whatever became of its writer. ``differences``: as
        :meth:`differences` found them just before. Returns how many entries
        changed."""
        if self.catalog is None:
            return 0
        if differences is None:
            differences = await self.differences(cwd)
        if differences.vanished:
            shown = ", ".join(session_id[:8] for session_id in differences.vanished[:5])
            more = " …" if len(differences.vanished) > 5 else ""
            _log.warning(
                "the session index listed %d session(s) whose log is gone, empty or "
                "unreadable (%s%s); dropped from the index",
                len(differences.vanished),
                shown,
                more,
            )
            for session_id in differences.vanished:
                await self.catalog.forget(session_id)
        for header in differences.missing:
            try:
                await self.index_whole(header.id)
            except PersistenceError as error:
                _log.warning("session %s is not indexed: %s", header.id, error)
        return len(differences.missing) + len(differences.vanished)

    async def index_whole(self, session_id: SessionId) -> None:
        """Index everything storage holds of a session."""
        assert self.catalog is not None
        loaded = await self.persistence.inspect(session_id)
        await self.catalog.record(
            loaded.header,
            stored_events(loaded),
            backend=self.persistence.name,
            location=self.persistence.location(session_id),
        )
