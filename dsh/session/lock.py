"""One writer per session: an exclusive lock held while a process writes a session.

Two processes appending to one log would interleave and overwrite each other's
records. So a session opened to be written (a new one, a resumed one) first takes an
exclusive ``flock`` on its lock file, ``$DSH_HOME/locks/<id>.lock``, and keeps it until
the session is closed or the process ends: the kernel drops the lock of a process
that dies, however it dies, so a lock is never stale. The file itself says who holds
it (PID and since when) for the message a second process gets. Reading a
session (``inspect``: ``dsh sessions show``, export, fork) takes no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dsh.session.persistence import PersistenceError

WAIT_POLL_S = 0.1
NOTE_TRIES, NOTE_POLL_S = 20, 0.01


@dataclass(frozen=True)
class Holder:
    """The process writing a session, as its lock file says."""

    pid: int
    since_ms: int

    def describe(self) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self.since_ms / 1000))
        return f"pid {self.pid}, since {since}"


class SessionBusyError(PersistenceError):
    """Another process is writing the session."""

    def __init__(self, session_id: str, holder: Holder | None) -> None:
        who = f"another dsh ({holder.describe()})" if holder else "another dsh"
        short = session_id[:8]
        super().__init__(
            f"session {short} is open in {who}, and a session has one writer at a time. "
            f"Read it with `dsh sessions show {short}`, continue it in a new session with "
            f"`--resume {short} --fork-session`, or wait for the other to close it with "
            "`--wait`."
        )
        self.session_id = session_id
        self.holder = holder


class SessionUnwritableError(PersistenceError):
    """The session cannot be opened to be written: its lock file cannot be made (a
    read-only or full disk, or no permission). It can still be read."""

    def __init__(self, session_id: str, path: Path, error: OSError) -> None:
        short = session_id[:8]
        super().__init__(
            f"session {short} cannot be written: its lock file {path} cannot be made "
            f"({error.strerror or error}). Read it with `dsh sessions show {short}`."
        )
        self.session_id = session_id


class SessionLocks:
    """The write locks of one ``$DSH_HOME``'s sessions, and the ones this process holds."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: dict[str, int] = {}

    def path(self, session_id: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)
        return self.folder / f"{safe}.lock"

    def acquire(self, session_id: str) -> None:
        """Take the session's lock now, or raise :class:`SessionBusyError` (another
        process holds it) or :class:`SessionUnwritableError` (no lock can be made)."""
        if session_id in self._held:
            return
        path = self.path(session_id)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise SessionUnwritableError(session_id, path, error) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionBusyError(session_id, self.holder(session_id)) from None
        except BaseException:
            os.close(fd)
            raise
        self._held[session_id] = fd
        note = {"pid": os.getpid(), "since": int(time.time() * 1000)}
        with contextlib.suppress(OSError):  # the lock holds even if the note fails
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(note).encode(), 0)

    async def acquire_waiting(self, session_id: str, *, wait: bool) -> None:
        """Take the lock; with ``wait``, once whoever holds it lets it go."""
        while True:
            try:
                self.acquire(session_id)
                return
            except SessionBusyError as busy:
                if not wait:
                    # The holder writes its note just after taking the lock: give it
                    # a moment, so that the message can name it.
                    for _ in range(NOTE_TRIES):
                        if busy.holder is not None:
                            break
                        await asyncio.sleep(NOTE_POLL_S)
                        busy = SessionBusyError(session_id, self.holder(session_id))
                    raise busy from None
            await asyncio.sleep(WAIT_POLL_S)

    def busy(self, session_id: str) -> bool:
        """Whether another process holds the session's lock right now."""
        if session_id in self._held:
            return False
        try:
            self.acquire(session_id)
        except SessionBusyError:
            return True
        except (SessionUnwritableError, OSError):
            return False
        self.release(session_id)
        return False

    def release(self, session_id: str) -> None:
        fd = self._held.pop(session_id, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing drops the flock; the file stays for the next writer

    def release_all(self) -> None:
        for session_id in list(self._held):
            self.release(session_id)

    def holder(self, session_id: str) -> Holder | None:
        """Who holds the lock, as its file says (None if it says nothing readable, as
        in the moment between a winner taking the lock and writing its note)."""
        try:
            raw = json.loads(self.path(session_id).read_text() or "null")
            return Holder(int(raw["pid"]), int(raw["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
