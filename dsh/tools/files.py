"""The files a tool is given by path: where a path the model wrote points, and how to
show it back.

A model names files relative to the working directory, absolutely, or from ``~``. A
tool resolves the name once (:func:`resolve`) and then has both forms the permission
policy checks (the path as named, and with symlinks followed) and the form to show in
its messages (relative to the working directory when inside it).

Resolving follows symlinks, so it touches the disk: tools call it through
``asyncio.to_thread``.

What a file holds is read and written through the ``workspace-files`` service
(:class:`WorkspaceFiles`): the disk, unless a front end stands in for it. A file
read from the disk directly (instructions, profiles, a mention) goes through
:func:`read_regular_file`, which a named pipe or a device cannot hang.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dsh.kernel import ServiceKey
from dsh.regular_files import FileTooLarge, NotRegularFile, read_regular_file

__all__ = [
    "DiskFiles",
    "FileTooLarge",
    "NotRegularFile",
    "Target",
    "WorkspaceFiles",
    "display_path",
    "read_regular_file",
    "resolve",
]


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
    """``file_path`` (absolute, relative to ``cwd``, or ``~``-based) as a target. Blocking."""
    raw = os.path.expanduser(file_path) if file_path.startswith("~") else file_path
    path = Path(os.path.normpath(os.path.join(cwd, raw)))
    return Target(display=display_path(path, cwd), path=path, real=Path(os.path.realpath(path)))


def display_path(path: Path, cwd: Path) -> str:
    """Relative to ``cwd`` when inside it (as written, or with symlinks followed), else absolute."""
    for base in (cwd, Path(os.path.realpath(cwd))):
        try:
            relative = path.relative_to(base)
        except ValueError:
            continue
        return relative.as_posix() or "."
    return str(path)


def _process_umask() -> int:
    # os.umask can only be read by setting it: once, at import, before a worker thread
    # could create a file meanwhile.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _process_umask()


class WorkspaceFiles(Protocol):
    """Where a tool reads and writes the text of the workspace's files: the disk
    (:class:`DiskFiles`, the root's ``workspace-files`` service), or what a front end
    puts in its place for the agents it shows (an editor's buffers, so unsaved text is
    read and an edit lands in the editor).

    Only the transport changes: every check on a call (permissions, protected paths,
    secret files, what the model last saw) is the tool's and happens before either
    method is called. Both raise :class:`OSError` for every failure
    (:class:`FileNotFoundError` when there is no such file), never anything else.
    """

    @property
    def on_disk(self) -> bool:
        """True when the text is the disk's own: a tool may then read and replace files
        itself, with checks a text cannot carry (versions, modes, binary content)."""
        ...

    async def read_text(self, path: Path) -> str:
        """The whole text of the file at ``path`` (absolute)."""
        ...

    async def write_text(self, path: Path, text: str) -> None:
        """Replace (or create) the file at ``path`` (absolute) with ``text``."""
        ...


class DiskFiles:
    """The disk itself, through a thread: UTF-8 exactly as stored (line endings
    untouched), replaced atomically with the file's mode kept."""

    on_disk = True

    async def read_text(self, path: Path) -> str:
        return await asyncio.to_thread(_read_text, path)

    async def write_text(self, path: Path, text: str) -> None:
        await asyncio.to_thread(_write_text, path, text)


def _read_text(path: Path) -> str:
    data = read_regular_file(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise OSError(errno.EILSEQ, f"not valid UTF-8 (byte {error.start})", str(path)) from None


def _write_text(path: Path, text: str) -> None:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise OSError(
            errno.EILSEQ, f"not UTF-8 text (character {error.start})", str(path)
        ) from None
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            else:
                # mkstemp makes 0600; a new file gets what the umask gives any other.
                os.fchmod(handle.fileno(), 0o666 & ~_UMASK)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


WORKSPACE_FILES: ServiceKey[WorkspaceFiles] = ServiceKey("workspace-files")
"""Where the text of the workspace's files is read and written: the disk, or a front
end's stand-in for the agents it shows (an editor's buffers), on the agent's context."""
