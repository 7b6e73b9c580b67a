"""Subagents: the ``task`` tool hands work to a child agent with a fresh context.

The child runs in this process on a session of its own, linked to the caller's (its
header names the parent, ``origin`` "subagent", its depth and its profile), so
``dsh sessions show`` opens it and it can be resumed. Profiles (``$DSH_HOME/agents/``
and a trusted project's ``.dsh/agents/`` and ``.claude/agents/``) give a kind of child
its instructions, tools and model; the model sees their names and descriptions in an
``<available_agents>`` context entry. ``[plugins.subagents] max_depth`` bounds nesting:
at the limit the tool is hidden. A child session resumed on its own gets its profile
again. Modules: ``profiles`` (the files), ``tool`` (the tool
and a child's run), ``events`` (a child's paid calls in the parent's log).
docs/subagents.md.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from dsh.agent import AgentHandle
from dsh.hooks import AGENT_SESSION_START
from dsh.kernel import Context, Plugin
from dsh.paths import dsh_home
from dsh.prompt import PromptContext, per_workspace
from dsh.services import AGENTS, PROMPT, SETTINGS, TOOLS
from dsh.session import register_events
from dsh_plugins.subagents.events import SUBAGENT_PAID, SubagentPaid
from dsh_plugins.subagents.profiles import Profile, scan
from dsh_plugins.subagents.tool import NAME, Limits, allowed_tools, scope_child, task_tool

__all__ = ["ENTRY", "NAME", "SUBAGENT_PAID", "Config", "SubagentPaid", "catalog", "plugin"]

ENTRY = "subagents"
"""The context entry listing the profiles (and the plugin name its messages carry)."""


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    max_depth: int = Field(default=3, ge=1, le=10)
    """How deep subagents may nest: a child at this depth has no ``task`` tool."""


def catalog(profiles: dict[str, Profile]) -> str | None:
    if not profiles:
        return None
    lines = ["<available_agents>"]
    for profile in sorted(profiles.values(), key=lambda p: p.name):
        lines.append(f"- {profile.name}: {profile.description}")
    lines.append("</available_agents>")
    return "\n".join(lines)


def vocabulary(ctx: Context) -> None:
    register_events(ctx, SUBAGENT_PAID)


def apply(ctx: Context, config: Config) -> None:
    settings = ctx.get(SETTINGS, None)
    project = settings.root if settings is not None and settings.trusted else None
    limits = Limits(max_depth=config.max_depth, home=dsh_home(), project=project)

    async def scan_catalog(pc: PromptContext) -> str | None:
        agent = pc.agent
        if agent is not None and agent.session.header.delegation_depth >= limits.max_depth:
            return None  # no task tool here: nothing to choose from
        profiles, _ = await asyncio.to_thread(scan, limits.home, limits.project)
        return catalog(profiles)

    # Scanned again only when the files may have changed, as the skills catalog is; the
    # text changes only when a profile does, so the request's cached prefix holds.
    ctx.get(PROMPT).context(ENTRY, 21, per_workspace(scan_catalog), form="catalog")
    ctx.get(TOOLS).register(NAME, task_tool(ctx.get(AGENTS), limits))

    async def resumed(agent: AgentHandle, source: str) -> None:
        """A child session taken up again on its own is the same kind of agent: its
        profile's tools and instructions, and no ``task`` at the depth limit."""
        header = agent.session.header
        if source != "resume" or header.origin != "subagent":
            return
        profiles, _ = await asyncio.to_thread(scan, limits.home, limits.project)
        profile = profiles.get(header.agent_preset) if header.agent_preset else None
        nested = header.delegation_depth < limits.max_depth
        scope_child(agent.ctx, profile, allowed_tools(profile, nested=nested))

    ctx.on(AGENT_SESSION_START, resumed)


plugin = Plugin(
    name="subagents",
    description="the task tool: child agents with fresh contexts, and agent profiles",
    inject=(TOOLS, PROMPT, AGENTS),
    optional=(SETTINGS,),
    config=Config,
    vocabulary=vocabulary,
    apply=apply,
)
