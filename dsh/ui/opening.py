"""Which agent a front end opens first: from the command-line choices, and the ways
out when another dsh writes the session (:mod:`dsh.ui.session_controller` asks)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.runtime import Runtime


class NothingToContinue(LookupError):
    """``--continue`` in a folder with no session yet."""


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
    agent options to set (``max_steps``).

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
                raise NothingToContinue(f"no earlier session in {cwd} to continue")
            target = latest.id
        # Where it is resumed, never the folder its log names (a log is only text).
        if fork:
            agent = await agents.fork(target, cwd=cwd)
        else:
            agent = await agents.resume(target, cwd=cwd, wait=wait)
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
