"""Reading a file whose path came from outside (a repository, a prompt, the model):
it may be a named pipe, a device or a socket, and a plain ``open`` of a named pipe
waits for a writer that never comes, hanging the thread (and, in a worker thread,
whatever awaits it). Every such read goes through :func:`read_regular_file`.

Plugins reach it as :mod:`dsh.tools.files` exports it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """What :func:`read_regular_file` refuses: a named pipe, a device, a socket (a folder
    raises :class:`IsADirectoryError`, as ``open`` does)."""


class FileTooLarge(OSError):
    """A file over the size :func:`read_regular_file` was asked to read at most."""

    def __init__(self, path: Path, size: int, max_bytes: int) -> None:
        super().__init__(errno.EFBIG, f"{size} bytes, over the limit of {max_bytes}", str(path))
        self.size = size
        self.max_bytes = max_bytes


def read_regular_file(path: Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file at ``path``. Blocking.

    Opened without blocking and checked on the open descriptor, so a named pipe (which
    a plain ``open`` waits on for a writer that never comes), a device or a socket is
    refused with :class:`NotRegularFile` instead of hanging the thread, whatever was
    swapped in after an earlier check. With ``max_bytes``, a larger file (or one that
    grows past it while read) raises :class:`FileTooLarge`. Raises :class:`OSError`
    for every failure."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "a folder", str(path))  # as open() says
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        if max_bytes is not None and status.st_size > max_bytes:
            raise FileTooLarge(path, status.st_size, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if max_bytes is not None and len(data) > max_bytes:
        raise FileTooLarge(path, len(data), max_bytes)
    return data
