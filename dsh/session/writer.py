"""Moving a live session's events to storage without ever blocking ``append``.

The writer subscribes to a session and queues its events. The first queued event
opens a short window (200 ms by default, never extended) after which the batch is
written; the end of a turn writes at once; ``flush()`` writes everything queued and
returns when it is durable. A failed write keeps its batch for the next attempt
and is reported, so nothing is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from dsh.session.events import SessionEvent
from dsh.session.persistence import SessionPersistence
from dsh.session.session import Session

_log = logging.getLogger("dsh.session")

# The loop flushes before every model request and every tool body, which covers the
# start of each step; the end of a turn is the one boundary nothing else follows.
BOUNDARY_TYPES = frozenset({"turn/end"})

Written = Callable[[Session, Sequence[SessionEvent]], Awaitable[None]]
Failed = Callable[[Session, BaseException], None]


class SessionWriter:
    def __init__(
        self,
        session: Session,
        persistence: SessionPersistence,
        *,
        stored: int,
        window: float = 0.2,
        on_written: Written | None = None,
        on_error: Failed | None = None,
    ) -> None:
        """``stored`` is how many of the session's events storage already holds."""
        self.session = session
        self._persistence = persistence
        self._window = window
        self._on_written = on_written
        self._on_error = on_error
        self._pending: list[SessionEvent] = []
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[bool]] = set()
        self._closed = False
        self.failures = 0
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
            self._kick()
        elif self._timer is None:
            self._timer = loop.call_later(self._window, self._kick)

    def _kick(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = asyncio.get_running_loop().create_task(self.flush())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> bool:
        """Write everything queued so far. True when it is all durable."""
        async with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch, self._pending = self._pending, []
            if not batch:
                return True
            try:
                await self._persistence.append(self.session.id, batch)
            except Exception as error:
                self._pending[:0] = batch  # kept, in order, for the next attempt
                self.failures += 1
                _log.error("session %s: write failed: %s", self.session.id, error)
                if self._on_error is not None:
                    self._on_error(self.session, error)
                return False
            # Still under the lock, so the hook sees batches in order, one at a time.
            if self._on_written is not None:
                try:
                    await self._on_written(self.session, batch)
                except Exception:
                    _log.exception("session %s: after-write hook failed", self.session.id)
        return True

    async def close(self) -> bool:
        """Write what is queued and stop following the session."""
        if self._closed:
            return not self._pending
        self._closed = True
        self._unsubscribe()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        return await self.flush()
