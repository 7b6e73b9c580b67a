"""Which front end shows an agent: what a plugin asks before it spends on a person's
behalf.

Each front end says so on the agent's own context as it takes the agent up
(:func:`shown_in`): the TUI, plain mode and ``dsh acp`` (an editor) are interactive,
``dsh -p`` is not. A plugin that makes a model call only for a person's convenience (a
session title) makes it where someone is there to see it, unless its own settings say
otherwise; an agent no front end claimed (a test's, a library's) counts as not
interactive.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from dsh.kernel import Context, ServiceKey

if TYPE_CHECKING:
    from dsh.agent_handle import AgentHandle

Kind = Literal["tui", "plain", "headless", "acp"]


@dataclass(frozen=True, kw_only=True)
class ToolServer:
    """A Model Context Protocol server the front end's client offers its sessions (an
    editor's, in ``session/new``): started by whichever plugin speaks the protocol,
    for the agents this front end shows."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FrontEnd:
    kind: Kind
    tool_servers: tuple[ToolServer, ...] = ()
    """The servers its client offers (none but an editor's)."""

    @property
    def interactive(self) -> bool:
        """A person follows the session as it runs (even when plain mode reads a script)."""
        return self.kind != "headless"

    @property
    def shows_notices(self) -> bool:
        """The session's notices (what a plugin's events say in the transcript) reach
        the person, every level: the TUI and plain mode show them; an editor (``dsh
        acp``) only warnings and errors, ``dsh -p`` none. A command whose result its
        event's notice already says need not say it again there."""
        return self.kind in ("tui", "plain")

    @property
    def settles_tools_first(self) -> bool:
        """The first request waits until every source of tools is ready or failed: a
        script's run (``dsh -p``) must not miss a tool for starting late, nor an editor's
        (``dsh acp``), which shows no tool joining later. The TUI and plain mode send
        at once, and tools join as they come up."""
        return self.kind in ("headless", "acp")


FRONT_END: ServiceKey[FrontEnd] = ServiceKey("front-end")
"""The front end showing an agent, on the agent's context (agent-scoped)."""


def shown_in(agent_ctx: Context, kind: Kind, tool_servers: tuple[ToolServer, ...] = ()) -> None:
    """Say on an agent's context which front end shows it (and the servers its client
    offers); the first to say it stays (a UI takes the same agent up again after a
    dialog)."""
    if agent_ctx.get(FRONT_END, None) is None:
        agent_ctx.provide(FRONT_END, FrontEnd(kind, tool_servers))


def front_end(agent: AgentHandle) -> FrontEnd | None:
    """The front end showing ``agent``, if one said."""
    return agent.ctx.get(FRONT_END, None)
