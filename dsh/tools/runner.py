"""Where a tool's shell command runs: the ``command-runner`` seam.

A tool that runs a command line in the foreground asks its agent's context for a
:class:`CommandRunner` (``context.services.get(COMMAND_RUNNER, None)``); when there is
none it runs the command itself, as it always has. A front end whose client can run
commands in a place of its own (an editor's terminals, through the Agent Client
Protocol) provides one on the agent's scope, so the person sees the command where they
work and the call's card can show it live. The runner is asked only once the call was
allowed: it sits behind the permission mode, the rules, the approvals and the command
analysis, never instead of them.

The request says everything a runner needs to stand in for a local run: the line (run
as ``bash -c``), where, the environment the local run would have, how long it may
take, how much of its output to keep, the turn's cancel signal, and the call it
belongs to (a front end shows the command on that call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from dsh.kernel import ServiceKey
from dsh.llm import CallId


@dataclass(frozen=True, kw_only=True)
class CommandRun:
    """One command to run, as the tool would run it locally."""

    call_id: CallId
    """The tool call running it."""
    command: str
    """The command line, run as ``bash -c <command>``."""
    argv: tuple[str, ...] | None = None
    """When set, the program and arguments to start instead of ``bash -c command``:
    the OS sandbox's command line around it (:mod:`dsh.sandbox`). A runner that can
    start only a shell command line must refuse (``CommandRunFailed``) rather than
    run ``command`` uncontained."""
    cwd: Path
    env: Mapping[str, str]
    """The whole environment the local run would give the command."""
    timeout_s: float
    """Then the command is stopped (``CommandOutcome.stopped == "timeout"``)."""
    output_limit: int
    """Bytes of output to keep: the end of it, when there is more."""
    signal: asyncio.Event
    """The turn's cancel signal: once set, the command is stopped (``"cancel"``)."""


@dataclass(frozen=True, kw_only=True)
class CommandOutcome:
    """How a command ended, and what it printed (stdout and stderr as they came)."""

    output: str
    truncated: bool = False
    """Only the end of the output was kept (``output_limit``)."""
    exit_code: int | None = None
    signal: str | None = None
    """The signal that ended it (``SIGTERM``), when one did."""
    stopped: Literal["timeout", "cancel"] | None = None
    """Why the runner stopped it, if it did."""
    duration_ms: int = 0
    place: str = ""
    """Where it ran, in a few words (``the editor's terminal``), for the result."""


class CommandRunFailed(Exception):
    """The runner could not run the command (its place refused or went away); the
    message says why, for the model and the person."""


class CommandRunner(Protocol):
    async def run(self, run: CommandRun) -> CommandOutcome:
        """Run the command until it exits, its timeout passes or the signal is set
        (then stop it); raise :class:`CommandRunFailed` when it cannot. Whatever it
        opened for the command is given back before it returns or raises, a cancelled
        task included."""
        ...


COMMAND_RUNNER: ServiceKey[CommandRunner] = ServiceKey("command-runner")
"""Where a tool's foreground shell commands run, when not here (an editor's terminals):
provided by a front end on an agent's scope; absent, a tool runs them itself."""
