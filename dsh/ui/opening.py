"""The session an interactive UI opens first, from the command-line choices."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.runtime import Runtime


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
) -> tuple[Agent, bool]:
    """The agent to show and whether it was resumed (its log is to be replayed):
    session ``resume`` (an id or prefix), the latest of ``cwd`` with
    ``continue_last``, else a new one; with the given model, provider and effort.

    Raises LookupError (no such session, nothing to continue), ValueError or OSError
    (a log that cannot be opened)."""
    agents = runtime.agents
    changes = {
        key: value
        for key, value in (("provider", provider), ("model", model), ("reasoning_effort", effort))
        if value is not None
    }
    if resume or continue_last:
        target = resume
        if target is None:
            latest = await runtime.sessions.latest(str(cwd))
            if latest is None:
                raise NothingToContinue(f"No earlier session in {cwd} to continue.")
            target = latest.id
        agent = await agents.resume(target)
        agent.set_options(**changes)
        return agent, True
    return await agents.create(cwd, agents.defaults.model_copy(update=changes)), False
