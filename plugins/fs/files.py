"""The filesystem backend the file tools share: what version a file is at, reading it
whole, and how a file is replaced safely. (Where a path points: :mod:`dsh.tools.files`;
what is wrong with a file that cannot be used: :mod:`dsh_plugins._shared.files`.)

Everything here is synchronous and blocking; the tools call it through
``asyncio.to_thread`` so the loop never waits on a disk.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import weakref
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from dsh.tools import ToolError
from dsh.tools.files import Target
from dsh.tools.protected import refusal
from dsh_plugins._shared.files import os_error, require_regular

MAX_EDIT_BYTES = 10 * 1024 * 1024
"""Larger files are neither edited in memory nor diffed before a write."""


def _process_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any
    # worker thread could be creating files with the wrong mask.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _process_umask()


def refuse_secret(target: Target, cwd: Path) -> None:
    """Raise when ``target`` is one of dsh's keys or its trust store. The permission
    policy refuses these before a call runs; this holds for a tool used without it."""
    refused = refusal(target.path, cwd)
    if refused is not None:
        raise ToolError(f"refused: {refused.reason}.", "FS_REFUSED")


def version_of(status: os.stat_result) -> str:
    """Changes whenever the file's content could have: a new inode, size, mtime or ctime."""
    return (
        f"{status.st_dev}:{status.st_ino}:{status.st_size}:"
        f"{status.st_mtime_ns}:{status.st_ctime_ns}"
    )


@dataclass(frozen=True)
class Current:
    """A file as found just now, read through one descriptor so the version and the
    bytes belong together."""

    version: str
    mode: int
    size: int
    data: bytes | None
    """None when the file was too large to load."""


def load(target: Target, max_bytes: int = MAX_EDIT_BYTES) -> Current | None:
    """The file at ``target`` (None when it does not exist), refusing what is not a
    regular file. Blocking."""
    try:
        fd = os.open(target.real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise os_error(error, target) from error
    try:
        status = os.fstat(fd)
        require_regular(status, target)
        data = None
        if status.st_size <= max_bytes:
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read()
        return Current(version_of(status), stat.S_IMODE(status.st_mode), status.st_size, data)
    except OSError as error:
        raise os_error(error, target) from error
    finally:
        os.close(fd)


def write_atomic(target: Target, data: bytes, mode: int | None) -> str:
    """Replace the file ``target`` resolves to with ``data`` in one step, keeping its
    mode (a new file gets the umask's); returns the new version. Blocking.

    A crash leaves the old file or the new one, never a torn mix: the bytes go to a
    temporary file beside the target, reach the disk, and are renamed over it.
    """
    real = target.real
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(
            dir=real.parent, prefix=f".{real.name[:100]}.", suffix=".dsh-tmp"
        )
    except OSError as error:
        raise os_error(error, target) from error
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), mode if mode is not None else 0o666 & ~UMASK)
        os.replace(temporary, real)
    except BaseException as error:
        with suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise os_error(error, target) from error
        raise
    _sync_directory(real.parent)
    try:
        return version_of(os.stat(real))
    except OSError as error:
        raise os_error(error, target) from error


def _sync_directory(folder: Path) -> None:
    # Makes the rename itself durable; some filesystems refuse, which costs only that.
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class TargetLocks:
    """One ``asyncio.Lock`` per real path, so two calls never interleave on one file.
    A lock lives only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def __call__(self, target: Target) -> asyncio.Lock:
        lock = self._locks.get(target.key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[target.key] = lock
        return lock
