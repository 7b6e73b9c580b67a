"""The sessions an interactive UI shows: the first, from the command-line choices, and
the switches ``/new`` and ``/resume`` make, the same in the TUI and in plain mode."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.runtime import Runtime

CLOSE_TIMEOUT = 10.0
"""Seconds a running turn has to end, once cancelled, before its agent is disposed."""


class NothingToContinue(LookupError):
    pass


async def open_agent(
    runtime: Runtime,
    cwd: Path,
    *,
    resume: str | None = None,
    continue_last: bool = False,
    model: str | None = None,
    provider: str | None = None,
    effort: str | None = None,
    fork: bool = False,
    wait: bool = False,
    options: Mapping[str, Any] | None = None,
) -> tuple[Agent, bool]:
    """The agent to show and whether it was resumed (its log is to be replayed):
    session ``resume`` (an id or prefix), the latest of ``cwd`` with
    ``continue_last``, else a new one; with the given model, provider and effort.
    ``fork``: the chosen session continues in a new one (it is only read); ``wait``:
    if another process writes it, wait until that one closes it. ``options``: more
    agent options to set (``max_steps``, ``auto_title``).

    Raises LookupError (no such session, nothing to continue), SessionBusyError
    (another process writes it), ValueError or OSError (a log that cannot be opened)."""
    agents = runtime.agents
    changes = {
        key: value
        for key, value in (("provider", provider), ("model", model), ("reasoning_effort", effort))
        if value is not None
    }
    changes.update(options or {})
    if resume or continue_last:
        target = resume
        if target is None:
            latest = await runtime.sessions.latest(str(cwd))
            if latest is None:
                raise NothingToContinue(f"No earlier session in {cwd} to continue.")
            target = latest.id
        if fork:
            agent = await agents.fork(target)
        else:
            agent = await agents.resume(target, wait=wait)
        agent.set_options(**changes)
        return agent, True
    return await agents.create(cwd, agents.defaults.model_copy(update=changes)), False


BusyChoice = Literal["fork", "wait", "read", "new"]
BUSY_CHOICES: tuple[tuple[BusyChoice, str], ...] = (
    ("fork", "Continue it in a new session (the other dsh keeps this one)"),
    ("wait", "Wait until the other dsh closes it, then continue it"),
    ("read", "Only read it"),
    ("new", "Start a new session instead"),
)
"""What a UI offers when the session to open is being written by another process
(:class:`~dsh.session.SessionBusyError`), in this order."""


def after_busy(choice: BusyChoice, session_id: str) -> dict[str, Any]:
    """The :func:`open_agent` arguments that carry out a :data:`BUSY_CHOICES` choice
    other than ``read`` for the busy session ``session_id``."""
    return {
        "resume": None if choice == "new" else session_id,
        "fork": choice == "fork",
        "wait": choice == "wait",
    }


class SessionHost(Protocol):
    """A UI showing one agent at a time."""

    agent: Agent | None
    cwd: Path

    def show(self, text: str, *, level: str = "info") -> None: ...

    async def pick_session(self) -> str | None:
        """Ask the person for a session; None when they pick none."""
        ...

    async def detach(self) -> None:
        """Stop showing the agent on screen (if any) and close it (:func:`close_agent`)."""
        ...

    async def attach(self, agent: Agent, *, replay: bool) -> None:
        """Show ``agent``; ``replay``: its log so far is an earlier conversation."""
        ...


async def close_agent(runtime: Runtime, agent: Agent) -> None:
    """Cancel its turn (waiting for the turn's closing events), then dispose of it."""
    from dsh.session.events import CancelByUser

    if agent.status != "idle":
        agent.cancel(CancelByUser())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(agent.when_idle(), CLOSE_TIMEOUT)
    await runtime.agents.dispose(agent)


async def start_new_session(host: SessionHost, runtime: Runtime) -> None:
    """``/new``: a fresh session in place of the one on screen, with its options."""
    options = host.agent.options if host.agent is not None else None
    await host.detach()
    await host.attach(await runtime.agents.create(host.cwd, options), replay=False)


async def switch_session(host: SessionHost, runtime: Runtime, session_id: str | None) -> None:
    """``/resume [ID]``: the session ``session_id`` names (an id or a prefix; None: the
    one the person picks) in place of the one on screen. One that cannot be resumed
    is reported, and a new session takes the screen."""
    from dsh.commands import CommandError

    if session_id is None:
        session_id = await host.pick_session()
        if session_id is None:
            return
    try:
        resolved = await runtime.sessions.resolve(session_id)
    except LookupError as error:
        raise CommandError(str(error)) from None
    if host.agent is not None and resolved == host.agent.id:
        host.show("That is the session on screen.")
        return
    await host.detach()
    try:
        agent = await runtime.agents.resume(resolved)
    except (LookupError, ValueError, OSError) as error:
        host.show(f"Could not resume {resolved}: {error}", level="error")
        await start_new_session(host, runtime)
        return
    await host.attach(agent, replay=True)
