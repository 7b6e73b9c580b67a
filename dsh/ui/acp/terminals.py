"""Commands in the editor's terminals, when its client offers them
(``clientCapabilities.terminal``).

:class:`EditorTerminals` is the agent's command runner (:mod:`dsh.tools.runner`): a
tool's foreground command, already allowed by the mode, the rules and the person, runs
as ``bash -c`` in a terminal the editor opens (``terminal/create``), which the call's
``tool_call_update`` embeds so the person watches it live. dsh waits for the exit
(``terminal/wait_for_exit``) no longer than the call's timeout and only while the turn
is not cancelled, kills the command otherwise (``terminal/kill``), reads the output
(``terminal/output``) and always releases the terminal (``terminal/release``), even
when the call itself is cancelled. An editor that refuses, fails or goes away makes a
clear error for the call, never an exception in the turn.

The environment is the one the local run would have, sent whole; what it withholds
from dsh's own (variables that look like credentials) is sent empty, since the
editor's terminal starts from the editor's environment and the protocol has no way to
unset a variable.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.schema import EnvVariable, TerminalExitStatus, WaitForTerminalExitResponse

from dsh import held_secrets
from dsh.kernel import Context
from dsh.llm import CallId
from dsh.tools import CommandOutcome, CommandRun, CommandRunFailed
from dsh.tools.runner import COMMAND_RUNNER

if TYPE_CHECKING:
    from dsh.agent import AgentHandle

_log = logging.getLogger("dsh.acp")

PLACE = "the editor's terminal"
KILL_WAIT_S = 5.0
"""How long the editor may take to end a killed command before its output is read."""
RELEASE_WAIT_S = 10.0

Shown = Callable[[CallId, str], None]
"""Told the call and its terminal once the editor opened it."""
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class EditorTerminals:
    """The :class:`~dsh.tools.runner.CommandRunner` of one editor session."""

    def __init__(self, client: Client, session_id: str, shown: Shown, spawn: Spawn) -> None:
        self._client = client
        self._session_id = session_id
        self._shown = shown
        self._spawn = spawn

    async def run(self, run: CommandRun) -> CommandOutcome:
        loop = asyncio.get_running_loop()
        started = loop.time()
        if run.signal.is_set():
            return CommandOutcome(output="", stopped="cancel", place=PLACE)
        try:
            created = await self._client.create_terminal(
                session_id=self._session_id,
                # Inside the sandbox when the tool wrapped it (its command line).
                command=run.argv[0] if run.argv else "bash",
                args=list(run.argv[1:]) if run.argv else ["-c", run.command],
                # What dsh took out of its environment at start is blanked too: the
                # editor may have started dsh with the same secrets in its own.
                env=editor_environment(run.env, held_secrets.environment()),
                cwd=str(run.cwd),
                output_byte_limit=run.output_limit,
            )
        except Exception as error:  # refused, gone, or an answer that is not one
            raise CommandRunFailed(f"the editor did not open a terminal: {_said(error)}") from None
        terminal = created.terminal_id
        _log.info("call %s runs in the editor's terminal %s", run.call_id, terminal)
        ended = False
        try:
            self._shown(run.call_id, terminal)
            stop, exited = await self._wait(terminal, run)
            if stop is not None:
                exited = await self._kill(terminal)
            output = await self._client.terminal_output(
                session_id=self._session_id, terminal_id=terminal
            )
            ended = True
        except Exception as error:
            raise CommandRunFailed(f"the editor's terminal failed: {_said(error)}") from None
        finally:
            # A cancelled call (not only a cancelled turn) still ends what it started; the
            # release is owned by the session, and shielded from a second cancel.
            await self._close_anyway(terminal, kill=not ended)
        status = output.exit_status or _status(exited)
        code, killed_by = _exit(status)
        return CommandOutcome(
            output=output.output,
            truncated=output.truncated,
            exit_code=code,
            signal=killed_by,
            stopped=stop,
            duration_ms=round((loop.time() - started) * 1000),
            place=PLACE,
        )

    async def _wait(
        self, terminal: str, run: CommandRun
    ) -> tuple[Literal["timeout", "cancel"] | None, WaitForTerminalExitResponse | None]:
        """The exit, or why the command must be stopped instead."""
        exited = asyncio.ensure_future(
            self._client.wait_for_terminal_exit(session_id=self._session_id, terminal_id=terminal)
        )
        cancelled = asyncio.ensure_future(run.signal.wait())
        try:
            await asyncio.wait(
                {exited, cancelled}, timeout=run.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            cancelled.cancel()
            if not exited.done():
                exited.cancel()
        if exited.done() and not exited.cancelled():
            return None, exited.result()  # an error the editor answered is raised here
        return ("cancel" if run.signal.is_set() else "timeout"), None

    async def _kill(self, terminal: str) -> WaitForTerminalExitResponse | None:
        """Kill the command and give the editor a moment to see it end."""
        await self._client.kill_terminal(session_id=self._session_id, terminal_id=terminal)
        try:
            return await asyncio.wait_for(
                self._client.wait_for_terminal_exit(
                    session_id=self._session_id, terminal_id=terminal
                ),
                KILL_WAIT_S,
            )
        except (TimeoutError, RequestError):
            return None

    async def _close_anyway(self, terminal: str, *, kill: bool) -> None:
        work = self._close(terminal, kill=kill)
        try:
            closing = self._spawn(work)
        except Exception:  # the session is closing already: this call is the owner left
            work.close()
            await self._close(terminal, kill=kill)
            return
        await asyncio.shield(closing)

    async def _close(self, terminal: str, *, kill: bool) -> None:
        try:
            async with asyncio.timeout(RELEASE_WAIT_S):
                if kill:  # release kills too; said first for an editor that does not
                    await self._client.kill_terminal(
                        session_id=self._session_id, terminal_id=terminal
                    )
                await self._client.release_terminal(
                    session_id=self._session_id, terminal_id=terminal
                )
        except Exception as error:
            _log.warning("the editor's terminal %s was not released: %s", terminal, error)


def offer_terminals(agent: AgentHandle, client: Client, owner: Context, shown: Shown) -> None:
    """Run the agent's commands in the editor's terminals (its command runner, on its
    own scope), the releases owned by ``owner``."""
    if isinstance(agent.ctx.get(COMMAND_RUNNER, None), EditorTerminals):
        return  # taken up again: offered already
    agent.ctx.provide(
        COMMAND_RUNNER,
        EditorTerminals(
            client, agent.id, shown, lambda work: owner.spawn(work, name="acp:terminal")
        ),
    )


def editor_environment(env: Mapping[str, str], ours: Mapping[str, str]) -> list[EnvVariable]:
    """``env`` whole (the editor's terminal may start from another environment than
    the one it gave dsh), and what of ours it withholds as empty."""
    sent = dict(env)
    sent.update({name: "" for name in ours if name not in env})
    return [EnvVariable(name=name, value=value) for name, value in sorted(sent.items())]


def _status(exited: WaitForTerminalExitResponse | None) -> TerminalExitStatus | None:
    if exited is None:
        return None
    return TerminalExitStatus(exit_code=exited.exit_code, signal=exited.signal)


def _exit(status: TerminalExitStatus | None) -> tuple[int | None, str | None]:
    """The exit code, or the signal's name (``SIGTERM``; an editor may send a number)."""
    if status is None:
        return None, None
    name = status.signal
    if name and name.isdigit():
        try:
            name = signal.Signals(int(name)).name
        except ValueError:
            name = f"signal {name}"
    return (status.exit_code if not name else None), name or None


def _said(error: BaseException) -> str:
    if isinstance(error, RequestError):
        data = error.data
        detail = data.get("details") or data.get("message") if isinstance(data, dict) else data
        said = f"{error} ({error.code})"
        return f"{said}: {detail}" if isinstance(detail, str) and detail else said
    if isinstance(error, ConnectionError):
        return "the editor is gone"
    return str(error) or type(error).__name__
