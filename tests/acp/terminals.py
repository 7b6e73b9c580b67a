"""An editor that offers terminals: each ``terminal/create`` really runs its command
(an asyncio subprocess in a group of its own), and every terminal call is recorded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError
from acp.schema import (
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from tests.acp.client import Editor
from tests.support.waits import HANG_S


@dataclass
class Terminal:
    process: asyncio.subprocess.Process
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reading: asyncio.Task[None] | None = None

    def status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)


@dataclass
class TerminalEditor(Editor):
    """``env``: the environment the editor's terminals start from."""

    env: dict[str, str] = field(default_factory=dict)
    refuse: str | None = None
    """Answer ``terminal/create`` with this error instead."""
    fail_wait: str | None = None
    """Answer ``terminal/wait_for_exit`` with this error instead."""
    open_once_printed: bytes | None = None
    """Answer ``terminal/create`` only once the command has printed this: an editor may
    take its time opening a terminal, and a call's timeout starts when it answers."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    terminals: dict[str, Terminal] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)
    started: list[Terminal] = field(default_factory=list)
    """Every terminal ever created, released or not: ``close`` ends them all (a release
    the agent's exit cut short leaves its terminal out of ``terminals``, its pipe open)."""

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        params = {
            "command": command,
            "args": args,
            "env": {v.name: v.value for v in env or []},
            "cwd": cwd,
            "outputByteLimit": output_byte_limit,
        }
        self.calls.append(("create", params))
        self._changed()
        if self.refuse is not None:
            raise RequestError.internal_error({"details": self.refuse})
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**self.env, **params["env"]},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self.pids.append(process.pid)
        terminal = Terminal(process, output_byte_limit)
        self.started.append(terminal)
        terminal.reading = asyncio.create_task(self._read(terminal))
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        if self.open_once_printed is not None:
            printed = self.open_once_printed
            await self.wait_for(lambda: printed in terminal.output)
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def _read(self, terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        while chunk := await terminal.process.stdout.read(4096):
            terminal.output += chunk
            if terminal.limit is not None and len(terminal.output) > terminal.limit:
                del terminal.output[: len(terminal.output) - terminal.limit]
                terminal.truncated = True
            self._changed()

    def _terminal(self, method: str, terminal_id: str) -> Terminal:
        self.calls.append((method, {"terminalId": terminal_id}))
        self._changed()
        terminal = self.terminals.get(terminal_id)
        if terminal is None:
            raise RequestError.invalid_params({"terminalId": "unknown"})
        return terminal

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self._terminal("output", terminal_id)
        if terminal.process.returncode is not None and terminal.reading is not None:
            await terminal.reading
        return TerminalOutputResponse(
            output=terminal.output.decode("utf-8", "replace"),
            truncated=terminal.truncated,
            exit_status=terminal.status(),
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self._terminal("wait_for_exit", terminal_id)
        if self.fail_wait is not None:
            raise RequestError.internal_error({"details": self.fail_wait})
        await terminal.process.wait()
        status = terminal.status()
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        terminal = self._terminal("kill", terminal_id)
        if terminal.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.process.pid, signal.SIGTERM)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        terminal = self._terminal("release", terminal_id)
        del self.terminals[terminal_id]
        if terminal.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.process.pid, signal.SIGKILL)
            await terminal.process.wait()
        await _finish_reading(terminal)
        return ReleaseTerminalResponse()

    async def close(self) -> None:
        """What a test leaves running is ended (by pid), and every pipe closed."""
        for terminal in self.started:
            if terminal.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(terminal.process.pid, signal.SIGKILL)
                await terminal.process.wait()
            await _finish_reading(terminal)


async def _finish_reading(terminal: Terminal) -> None:
    """Read the output to its end, which closes the process's pipe (a transport left
    open is reported when the loop it belonged to is gone): what the program left
    holding the pipe (inside a sandbox, its namespace) ends a moment after it."""
    if terminal.reading is None:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(terminal.reading), HANG_S)
    terminal.reading.cancel()
    # And closed now, not when collected: its end of the process may be noticed after
    # the loop that owns it has closed (seen with sandboxed commands on a loaded run).
    transport = getattr(terminal.process, "_transport", None)
    if transport is not None:
        transport.close()
