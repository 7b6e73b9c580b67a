"""Files as the language servers see them: ``file://`` URIs, their text and a stamp to
notice when they change, and the workspace a session's working directory belongs to.
(Where a path the model wrote points, and how to show it: :mod:`dsh.tools.files`; a
file that cannot be read is reported as the file tools report it.)

Everything here blocks on the disk; callers go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from dsh.tools import ToolError
from dsh.tools.files import Target, read_regular_file
from dsh_plugins._shared.files import os_error, require_regular, sniff

MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""Larger files are not sent to a server: none is useful on them and the JSON is huge."""

Stamp = tuple[int, int, int]
"""(inode, size, mtime in ns): changes whenever the content could have."""


@dataclass(frozen=True)
class Source:
    path: Path
    """Absolute, symlinks followed: one file is one document whatever it is called."""
    text: str
    stamp: Stamp


def to_uri(path: Path) -> str:
    return path.as_uri()


def from_uri(uri: str) -> Path | None:
    """The path of a ``file:`` URI (percent-decoded), or None for another scheme."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    return Path(os.path.normpath(unquote(parts.path)))


def stamp_of(status: os.stat_result) -> Stamp:
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def current_stamp(path: Path) -> Stamp | None:
    """The file's stamp now, or None when it is gone (or not a regular file)."""
    try:
        status = path.stat()
    except OSError:
        return None
    return stamp_of(status) if path.is_file() else None


def read_source(path: Path, shown: str) -> Source:
    """The file's text (invalid UTF-8 replaced), or a ToolError the model can act on;
    ``shown`` is how the error names the file."""
    target = Target(display=shown, path=path, real=path)
    try:
        # Non-blocking, so a named pipe cannot hang the worker thread on open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            status = os.fstat(fd)
            require_regular(status, target)
            if status.st_size > MAX_SOURCE_BYTES:
                raise ToolError(
                    f"{shown} is too large for the language server ({status.st_size} bytes; "
                    f"the limit is {MAX_SOURCE_BYTES}). Use grep instead.",
                    "LSP_FILE_TOO_LARGE",
                )
            data = handle.read()
    except OSError as error:
        raise os_error(error, target) from None
    kind = sniff(data)
    if kind is not None:
        raise ToolError(f"{shown} is {kind}, not source text.", "FS_NOT_TEXT")
    return Source(path, data.decode("utf-8", errors="replace"), stamp_of(status))


def read_lines_quietly(path: Path) -> str | None:
    """A file's text for showing result lines, or None if it cannot be read."""
    try:
        return read_regular_file(path, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except OSError:  # too large, gone, or a pipe that would hang the thread
        return None


def find_workspace(cwd: Path, use_git_root: bool) -> Path:
    """The folder a server works on: the git root above ``cwd`` (so references span the
    whole repository even from a subfolder), else ``cwd`` itself. Blocking."""
    start = Path(os.path.realpath(cwd))
    if use_git_root:
        home = Path(os.path.realpath(Path.home()))
        for folder in (start, *start.parents):
            if (folder / ".git").exists():
                # A home folder kept in git is not a project: stay where we are.
                return start if folder == home and start != home else folder
    return start
