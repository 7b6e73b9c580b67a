"""A stdio server's stderr: the tail kept for its status.

The child writes to a pipe of its own (not dsh's terminal); :class:`StderrTail` reads
it in a task the connection's context owns and keeps the last :data:`STDERR_TAIL`
bytes, which a failed server's status shows.
"""

from __future__ import annotations

import asyncio
import os
from typing import TextIO

from dsh.kernel import Context

STDERR_TAIL = 4096
"""Bytes of a server's stderr kept for its status."""


class StderrTail:
    """The last :data:`STDERR_TAIL` bytes a server wrote to its stderr."""

    def __init__(self) -> None:
        self.tail = b""

    def text(self) -> str:
        return self.tail.decode("utf-8", errors="replace")

    def pipe(self, ctx: Context, name: str) -> tuple[TextIO, asyncio.Task[None]]:
        """The write end to hand the child (inheritable; close this copy once it has
        started) and the task reading the other end, owned by ``ctx``."""
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, True)
        reader = ctx.spawn(self._read(read_end), name=f"mcp:{name}:stderr")
        return os.fdopen(write_end, "w"), reader

    async def _read(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader()
        pipe = os.fdopen(fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), pipe
        )
        try:
            while chunk := await stream.read(4096):
                self.tail = (self.tail + chunk)[-STDERR_TAIL:]
        finally:
            transport.close()
