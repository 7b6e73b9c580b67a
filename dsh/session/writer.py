"""Moving a live session's events to storage without ever blocking ``append``.

The writer subscribes to a session and queues its events. The first queued event
opens a short window (200 ms by default, never extended) after which the batch is
written; the end of a turn writes at once; ``flush()`` writes everything queued and
returns when it is stored. A failed write keeps its batch, in order, for the next
attempt, which comes with the next window or, if nothing new is logged, after a
pause that grows while writes keep failing (:data:`RETRY_S`): a disk that is freed
again gets everything, and nothing is dropped. Whoever follows the writer hears when
writes start failing and when they succeed again (``on_failing``), and of each batch
once it is stored (``on_written``), in order.

Two levels of durable: a write survives the process being killed as soon as it is
in the file (the kernel holds it); surviving a power cut takes an fsync, which costs
more than the rest of a step. So the window's writes, ``write_soon()`` (before a
model request) and ``flush(sync=False)`` skip the fsync unless the file has gone
unsynced for a second; the end of a turn and ``flush()`` sync.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from dsh.session.events import SessionEvent
from dsh.session.persistence import LogLostError, SessionPersistence
from dsh.session.session import Session

_log = logging.getLogger("dsh.session")

# The loop flushes before every model request and every tool body, which covers the
# start of each step; the end of a turn is the one boundary nothing else follows.
BOUNDARY_TYPES = frozenset({"turn/end"})

# The longest a written batch waits for an fsync while the loop keeps skipping it.
MAX_UNSYNCED_S = 1.0

# After the n-th failed write in a row, the next try comes RETRY_S[n - 1] seconds later
# (the last one from then on) unless an event or a flush asks sooner: soon enough to
# notice a freed disk, seldom enough not to spin on a full one.
RETRY_S = (0.25, 0.5, 1.0, 2.0, 5.0)

SESSION_WRITE_FAILED = "SESSION_WRITE_FAILED"
"""The failure code of a turn stopped because its log could not be written."""

Written = Callable[[Session, Sequence[SessionEvent]], Awaitable[None]]
Failing = Callable[[Session, BaseException | None], None]
"""Writes of the session started failing (the error), or succeed again (None)."""


def unstored_message(session_id: str, error: BaseException | None, stored: int) -> str:
    """The one line that says a session's log could not be written, and what of it is
    safe: ``stored`` events (none: there is no session to resume)."""
    if isinstance(error, LogLostError):
        # No space to free: the log itself is gone or cut short, as it says.
        return f"{error}, so dsh stopped the session {session_id}"
    reason = _reason(error)
    if stored == 0:
        return (
            f"the session log cannot be written ({reason}), so dsh stopped; nothing of "
            "this session was stored"
        )
    return (
        f"the session log cannot be written ({reason}), so dsh stopped; what it holds so "
        f"far is safe: free the space and resume the session {session_id}"
    )


def failing_message(error: BaseException) -> str:
    """What a person is told the moment a session's writes start failing."""
    return (
        f"The session log cannot be written ({_reason(error)}): what happens now is not "
        "saved. dsh keeps trying, and stops the turn before anything with effects."
    )


RECOVERED_MESSAGE = "The session log is written again: nothing was lost."


def _reason(error: BaseException | None) -> str:
    if error is None:
        return "unknown"
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


class SessionWriter:
    def __init__(
        self,
        session: Session,
        persistence: SessionPersistence,
        *,
        stored: int,
        window: float = 0.2,
        on_written: Written | None = None,
        on_failing: Failing | None = None,
    ) -> None:
        """``stored`` is how many of the session's events storage already holds."""
        self.session = session
        self._persistence = persistence
        self._window = window
        self._on_written = on_written
        self._on_failing = on_failing
        self.stored = stored
        """How many of the session's events storage holds (written, if not synced)."""
        self._pending: list[SessionEvent] = []
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[bool]] = set()
        self._closed = False
        self._writes = 0
        self._unsynced_since: float | None = None
        """When the oldest write not yet fsynced was made."""
        self.failures = 0
        self._failing = 0
        """Writes failed in a row: how long the next retry waits."""
        self.error: BaseException | None = None
        """The last write's failure, until a write succeeds again."""
        self._unsubscribe = session.subscribe(self._queue, from_seq=stored)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _queue(self, event: SessionEvent) -> None:
        self._pending.append(event)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): the next flush() writes it
        if event.type in BOUNDARY_TYPES:
            self._kick(sync=True, wait_for_sync=False)
        elif self._timer is None:
            self._timer = loop.call_later(self._window, self._kick)

    def write_soon(self) -> None:
        """Start writing what is queued now, without waiting for it (or an fsync)."""
        if self._pending and not self._closed:
            self._kick()

    def _kick(self, sync: bool = False, wait_for_sync: bool = True) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._closed:
            return  # close() writes what is left itself
        if sync and not wait_for_sync:
            # Written now, synced right after: a flush(sync=False) waiting behind
            # this one is released once the data is written, not after the fsync.
            task = asyncio.get_running_loop().create_task(self._write_then_sync())
        else:
            task = asyncio.get_running_loop().create_task(self.flush(sync=sync))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self, *, sync: bool = True) -> bool:
        """Write everything queued so far. True when it is all stored: synced to disk
        with ``sync``, else at least safe from the process dying."""
        async with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch, self._pending = self._pending, []
            now = time.monotonic()
            waited = self._unsynced_since is not None and now - self._unsynced_since
            sync = sync or (waited is not False and waited >= MAX_UNSYNCED_S)
            if not batch:
                if sync and self._unsynced_since is not None:
                    # Nothing new, but earlier batches still wait for their fsync:
                    # an empty append is not enough, so re-sync through the backend.
                    return await self._sync_only()
                return True
            try:
                await self._persistence.append(self.session.id, batch, sync=sync)
            except Exception as error:
                self._pending[:0] = batch  # kept, in order, for the next attempt
                self._failed(error)
                return False
            self.stored = batch[-1].seq + 1
            self._note_written(sync, now)
            # Still under the lock, so the hook sees batches in order, one at a time.
            if self._on_written is not None:
                try:
                    await self._on_written(self.session, batch)
                except Exception:
                    _log.exception("session %s: after-write hook failed", self.session.id)
        return True

    async def _write_then_sync(self) -> bool:
        if not await self.flush(sync=False):
            return False
        if self._unsynced_since is None:
            return True
        # Outside the lock, so writes go on meanwhile; only if none came in during
        # the fsync is everything known to be synced.
        writes = self._writes
        try:
            await self._persistence.sync(self.session.id)
        except Exception as error:
            self._failed(error)
            return False
        if self._writes == writes:
            self._unsynced_since = None
        return True

    async def _sync_only(self) -> bool:
        now = time.monotonic()
        try:
            await self._persistence.sync(self.session.id)
        except Exception as error:
            self._failed(error)
            return False
        self._note_written(True, now)
        return True

    def _note_written(self, synced: bool, at: float) -> None:
        self._writes += 1
        if synced:
            self._unsynced_since = None
        elif self._unsynced_since is None:
            self._unsynced_since = at
        if self.error is not None:
            self.error = None
            self._failing = 0
            _log.warning("session %s: writes succeed again", self.session.id)
            self._tell(None)

    def _failed(self, error: BaseException) -> None:
        self.failures += 1
        self._failing += 1
        first = self.error is None
        self.error = error
        if first:  # one line for a run of failures, not one per retry
            _log.error("session %s: write failed: %s", self.session.id, error)
            self._tell(error)
        else:
            _log.debug("session %s: write failed again: %s", self.session.id, error)
        if self._pending and not self._closed and self._timer is None:
            delay = RETRY_S[min(self._failing, len(RETRY_S)) - 1]
            self._timer = asyncio.get_running_loop().call_later(delay, self._kick)

    def _tell(self, error: BaseException | None) -> None:
        if self._on_failing is None:
            return
        try:
            self._on_failing(self.session, error)
        except Exception:
            _log.exception("session %s: a storage listener failed", self.session.id)

    def stop_following(self) -> None:
        """Queue nothing the session appends from now on (what is queued is still
        written): the log as a process killed at this moment would leave it."""
        self._unsubscribe()

    async def close(self) -> bool:
        """Write what is queued and stop following the session (no retry after this:
        what the last attempt could not write stays unstored)."""
        if self._closed:
            return not self._pending
        self._closed = True
        self._unsubscribe()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        return await self.flush()
