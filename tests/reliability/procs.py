"""Starting ``dsh`` as real processes, two ways, behind one interface.

:class:`ExecLauncher` runs ``python -m dsh ARGS`` (what a user runs); :class:`ForkLauncher`
asks the fork server of :mod:`tests.reliability.zygote` for a child that has dsh
imported already, which makes a run several times cheaper to start. Either gives a
:class:`Proc` with piped stdin, stdout and stderr that can be killed by SIGKILL.
Every wait is bounded; every process is killed by its pid, never by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT = 60.0  # a loaded 2-core machine can take long to start Python


class Proc(Protocol):
    pid: int
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...


class Launcher(Protocol):
    name: str

    async def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Proc: ...

    async def aclose(self) -> None: ...


# ---------------------------------------------------------------------- exec


class _ExecProc:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self.pid = process.pid
        assert process.stdin
        assert process.stdout
        assert process.stderr
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.stderr = process.stderr

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        return await self._process.wait()

    def kill(self) -> None:
        if self._process.returncode is None:
            self._process.send_signal(signal.SIGKILL)


class ExecLauncher:
    name = "exec"

    def __init__(self) -> None:
        self._procs: list[_ExecProc] = []

    async def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Proc:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dsh",
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        proc = _ExecProc(process)
        self._procs.append(proc)
        return proc

    async def aclose(self) -> None:
        for proc in self._procs:
            proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), START_TIMEOUT)


# ---------------------------------------------------------------------- fork server


async def _reader(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader


async def _writer(fd: int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(fd, "wb", buffering=0)
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


class _ForkProc:
    def __init__(
        self,
        launcher: ForkLauncher,
        pid: int,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        exited: asyncio.Future[int],
    ) -> None:
        self._launcher = launcher
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        if not self._exited.done():
            with contextlib.suppress(OSError):
                self._launcher.send({"op": "kill", "pid": self.pid})


class ForkLauncher:
    """The client of one fork server; start it with :meth:`open`."""

    name = "fork"

    def __init__(self, server: asyncio.subprocess.Process, control: socket.socket) -> None:
        self._server = server
        self._control = control
        self._ids = itertools.count()
        self._spawned: dict[int, asyncio.Future[int]] = {}
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._early_exits: dict[int, int] = {}
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._listener = asyncio.ensure_future(self._listen())
        self._procs: list[_ForkProc] = []
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, env: Mapping[str, str], log: Path) -> ForkLauncher:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with log.open("wb") as errors:
            server = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.reliability.zygote",
                str(theirs.fileno()),
                pass_fds=[theirs.fileno()],
                cwd=ROOT,
                env={**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=errors,
            )
        theirs.close()
        ours.setblocking(False)
        launcher = cls(server, ours)
        try:
            await asyncio.wait_for(asyncio.shield(launcher._ready), START_TIMEOUT)
        except BaseException:
            await launcher.aclose()
            raise
        return launcher

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = json.dumps(message).encode()
        if fds:
            socket.send_fds(self._control, [data], list(fds))
        else:
            self._control.send(data)

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(self._control, 1 << 20)
            except OSError:
                data = b""
            if not data:
                error = RuntimeError("the fork server went away")
                for future in (*self._spawned.values(), *self._exits.values()):
                    if not future.done():
                        future.set_exception(error)
                if not self._ready.done():
                    self._ready.set_exception(error)
                return
            message = json.loads(data)
            match message["op"]:
                case "ready":
                    self._ready.set_result(None)
                case "spawned":
                    self._spawned.pop(message["id"]).set_result(message["pid"])
                case "exit":
                    exited = self._exits.get(message["pid"])
                    if exited is None:  # before the spawn answer was read
                        self._early_exits[message["pid"]] = message["code"]
                    elif not exited.done():
                        exited.set_result(message["code"])

    async def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Proc:
        loop = asyncio.get_running_loop()
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        request_id = next(self._ids)
        spawned: asyncio.Future[int] = loop.create_future()
        self._spawned[request_id] = spawned
        try:
            async with self._lock:
                self.send(
                    {
                        "op": "spawn",
                        "id": request_id,
                        "argv": list(argv),
                        "env": dict(env),
                        "cwd": str(cwd),
                    },
                    [in_read, out_write, err_write],
                )
        finally:
            for fd in (in_read, out_write, err_write):
                os.close(fd)  # the server has its own copies now
        pid = await asyncio.wait_for(spawned, START_TIMEOUT)
        exited: asyncio.Future[int] = loop.create_future()
        self._exits[pid] = exited
        if pid in self._early_exits:
            exited.set_result(self._early_exits.pop(pid))
        proc = _ForkProc(
            self,
            pid,
            await _writer(in_write),
            await _reader(out_read),
            await _reader(err_read),
            exited,
        )
        self._procs.append(proc)
        return proc

    async def aclose(self) -> None:
        for proc in self._procs:
            proc.kill()
        with contextlib.suppress(OSError):
            self._control.close()  # the server kills what is left and exits
        self._listener.cancel()
        await asyncio.gather(self._listener, return_exceptions=True)
        try:
            await asyncio.wait_for(self._server.wait(), START_TIMEOUT)
        except TimeoutError:
            self._server.kill()
            await self._server.wait()
