"""One ``bash -c`` process in a process group of its own, and how to end all of it.

The command runs as the leader of a new session, so everything it starts (unless it
starts a session of its own) shares its process group and one ``killpg`` reaches it
all. Stopping sends SIGTERM to the group, allows ``GRACE_S`` for a clean exit, then
sends SIGKILL to whatever is left.

Its output pipes are ours, not asyncio's: on Python 3.11 ``Process.wait()`` returns
only once every pipe is closed, and a grandchild left running in the background keeps
them open for as long as it lives. So we learn of the exit from ``wait()`` and read
the pipes ourselves, giving up on them ``GRACE_S`` after the exit at the latest.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
from collections.abc import Callable
from pathlib import Path

from dsh.processes import adopt, child_options
from dsh.sandbox import Wrapped, launch_options

GRACE_S = 3.0
"""Between SIGTERM and SIGKILL, and the longest wait for pipes after the exit."""
KILL_WAIT_S = 1.0
"""How long SIGKILL may take to empty the group before we stop watching."""
POLL_S = 0.05

Sink = Callable[[bytes], None]


class SpawnError(Exception):
    """bash could not be started."""


class _PipeReader(asyncio.Protocol):
    def __init__(self, sink: Sink, closed: asyncio.Future[None]) -> None:
        self._sink = sink
        self._closed = closed

    def data_received(self, data: bytes) -> None:
        self._sink(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)


class ShellProcess:
    def __init__(
        self,
        process: asyncio.subprocess.Process,
        readers: list[tuple[asyncio.BaseTransport, asyncio.Future[None]]],
    ) -> None:
        self._process = process
        self._readers = readers
        self.pgid = process.pid
        self._term_sent: float | None = None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        """The exit status of bash itself (negative: the signal that ended it)."""
        return await self._process.wait()

    async def drain(self, seconds: float = GRACE_S) -> bool:
        """Wait up to ``seconds`` for both pipes to close, then stop reading them.
        False when a survivor (a background grandchild) still held one open."""
        pending = [closed for _, closed in self._readers if not closed.done()]
        if pending:
            await asyncio.wait(pending, timeout=seconds)
        complete = all(closed.done() for _, closed in self._readers)
        self.close()
        return complete

    def close(self) -> None:
        """Stop reading the pipes (the writers then get SIGPIPE or EPIPE)."""
        for transport, _ in self._readers:
            if not transport.is_closing():
                transport.close()

    async def terminate(self, grace: float = GRACE_S) -> None:
        """SIGTERM to the group, SIGKILL to what is left after ``grace`` seconds.
        Calling it again (a cancel landing mid-way) keeps the first call's deadline."""
        now = asyncio.get_running_loop().time()
        if self._term_sent is None:
            self._term_sent = now
            self._signal(signal.SIGTERM)
        if await self._gone_within(max(0.0, self._term_sent + grace - now)):
            return
        self._signal(signal.SIGKILL)
        await self._gone_within(KILL_WAIT_S)

    def kill(self) -> None:
        """SIGKILL to the group at once: the last resort when we cannot await."""
        if group_alive(self.pgid):
            self._signal(signal.SIGKILL)

    def _signal(self, number: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, number)

    async def _gone_within(self, seconds: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            if self._process.returncode is not None and not group_alive(self.pgid):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(POLL_S)


async def spawn_shell(
    command: str,
    *,
    cwd: Path,
    env: dict[str, str],
    stdout: Sink,
    stderr: Sink,
    wrapped: Wrapped | None = None,
) -> ShellProcess:
    """Start ``bash -c command`` in a new session, its output fed to the sinks; as
    ``wrapped`` says when given (the sandbox's command line for it, see
    :meth:`dsh.sandbox.Sandbox.wrap`)."""
    argv = wrapped.argv if wrapped is not None else ["bash", "-c", command]
    options = launch_options(wrapped) if wrapped is not None else child_options()
    loop = asyncio.get_running_loop()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=wrapped.env if wrapped is not None else env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            **options,  # its own group, ended with dsh
        )
        adopt(process.pid)
    except BaseException as error:
        os.close(out_read)
        os.close(err_read)
        if isinstance(error, OSError):
            raise SpawnError(error.strerror or str(error)) from error
        raise
    finally:
        # The child holds its own copies; ours would keep the pipes open forever.
        os.close(out_write)
        os.close(err_write)
    readers: list[tuple[asyncio.BaseTransport, asyncio.Future[None]]] = []
    unowned = [out_read, err_read]
    try:
        for fd, sink in ((out_read, stdout), (err_read, stderr)):
            closed: asyncio.Future[None] = loop.create_future()
            pipe = os.fdopen(fd, "rb", buffering=0)
            unowned.remove(fd)
            try:
                transport, _ = await loop.connect_read_pipe(
                    functools.partial(_PipeReader, sink, closed), pipe
                )
            except BaseException:
                pipe.close()
                raise
            readers.append((transport, closed))
    except BaseException:
        for fd in unowned:
            os.close(fd)
        shell = ShellProcess(process, readers)
        shell.kill()
        shell.close()
        raise
    return ShellProcess(process, readers)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running. Zombies do not count:
    where nothing reaps orphans (a container whose init does not), they would keep
    the group 'alive' forever."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True  # no procfs: trust killpg
    with entries:
        for entry in entries:
            if entry.name.isdigit() and _running_member(entry.name, pgid):
                return True
    return False


def _running_member(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return False
    # After the command name: state, ppid, pgrp.
    return len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")
