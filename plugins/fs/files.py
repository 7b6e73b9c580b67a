"""The filesystem backend the tools share: where a path points, what version a file is
at, whether its bytes are text, and how a file is replaced safely.

Everything here is synchronous and blocking; the tools call it through
``asyncio.to_thread`` so the loop never waits on a disk.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
import tempfile
import weakref
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from dsh.tools import ToolError
from dsh.tools.protected import refusal

SNIFF_BYTES = 8 * 1024
"""How much of a file's head decides whether it is text (a NUL there means binary)."""
MAX_EDIT_BYTES = 10 * 1024 * 1024
"""Larger files are neither edited in memory nor diffed before a write."""


def _process_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any
    # worker thread could be creating files with the wrong mask.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _process_umask()


@dataclass(frozen=True)
class Target:
    """A path a tool was given, resolved against the working directory."""

    display: str
    """How to show it: relative to the working directory when inside it, else absolute."""
    path: Path
    """Absolute, symlinks not followed: what the model named."""
    real: Path
    """Symlinks followed: the file actually read or replaced, and the key for
    observations and locks."""

    @property
    def key(self) -> str:
        return str(self.real)

    @property
    def redirected(self) -> bool:
        """Whether a symlink makes the path name a different file."""
        return self.real != self.path


def resolve(file_path: str, cwd: Path) -> Target:
    raw = os.path.expanduser(file_path) if file_path.startswith("~") else file_path
    path = Path(os.path.normpath(os.path.join(cwd, raw)))
    return Target(display=display_path(path, cwd), path=path, real=Path(os.path.realpath(path)))


def display_path(path: Path, cwd: Path) -> str:
    for base in (cwd, Path(os.path.realpath(cwd))):
        try:
            relative = path.relative_to(base)
        except ValueError:
            continue
        return relative.as_posix() or "."
    return str(path)


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


def os_error(error: OSError, target: Target) -> ToolError:
    """The model's version of an OS failure, with what it can do about it."""
    where = target.display
    if isinstance(error, FileNotFoundError):
        return ToolError(
            f"{where} does not exist. Check the path (glob finds files by name).", "FS_NOT_FOUND"
        )
    if isinstance(error, NotADirectoryError) or error.errno == errno.EEXIST:
        return ToolError(
            f"a parent of {where} is a file, not a directory; choose another path.",
            "FS_NOT_DIRECTORY",
        )
    if isinstance(error, IsADirectoryError):
        return ToolError(
            f"{where} is a directory, not a file; use glob to list its files.",
            "FS_NOT_REGULAR_FILE",
        )
    if isinstance(error, PermissionError):
        return ToolError(
            f"permission denied for {where}; it cannot be accessed by this user.",
            "FS_PERMISSION_DENIED",
        )
    reason = error.strerror or str(error)
    return ToolError(f"cannot access {where}: {reason}.", "FS_IO_ERROR")


# Signatures of the image formats a model is most often pointed at, so it hears
# "a PNG image" rather than "binary". BMP's two-byte tag is too weak alone; it counts
# only together with a NUL, which every real BMP header has.
_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF87a", "a GIF image"),
    (0, b"GIF89a", "a GIF image"),
    (0, b"II*\x00", "a TIFF image"),
    (0, b"MM\x00*", "a TIFF image"),
    (0, b"\x00\x00\x01\x00", "an ICO image"),
    (4, b"ftypavif", "an AVIF image"),
    (4, b"ftypheic", "a HEIC image"),
    (0, b"%PDF-", "a PDF document"),
)


def sniff(head: bytes) -> str | None:
    """What a file is when it is not text (``"a PNG image"``, ``"a binary file"``), or None."""
    for offset, signature, kind in _SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "a WebP image"
    if b"\x00" in head[:SNIFF_BYTES]:
        return "a BMP image" if head[:2] == b"BM" else "a binary file"
    return None


def not_text(target: Target, kind: str, size: int) -> ToolError:
    return ToolError(
        f"{target.display} is {kind} ({format_size(size)}), not text; these tools read and "
        "edit text files only.",
        "FS_NOT_TEXT",
    )


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


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


def require_regular(status: os.stat_result, target: Target) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise ToolError(
            f"{target.display} is a directory, not a file; use glob to list its files.",
            "FS_NOT_REGULAR_FILE",
        )
    if not stat.S_ISREG(status.st_mode):
        raise ToolError(
            f"{target.display} is not a regular file (a device, socket or pipe); "
            "only regular files can be read or changed.",
            "FS_NOT_REGULAR_FILE",
        )


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
