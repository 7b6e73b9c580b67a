"""MCP servers as dsh tools, through the official ``mcp`` SDK.

Each configured server (``[mcp.servers.NAME]`` in settings, or a trusted project's
``.mcp.json``) runs in the background; its tools appear as ``mcp__<server>__<tool>``
once it is ready. A server that fails is marked failed with a reason and its stderr,
and dsh goes on without its tools. ``docs/mcp.md`` has the settings.

The configuration is the top-level ``[mcp]`` table, read from the ``settings``
service rather than a ``[plugins.mcp]`` table: it is the name other agents' users
know, and the core neither names it nor needs to (a project's ``[mcp]`` is layered
in only when the project is trusted, as every table is that does not narrow).

Modules: ``config`` (the table, ``.mcp.json``, ``${VAR}``), ``schema`` (tool names
and argument schemas), ``results`` (a result as text), ``connection`` (one server),
``service`` (all of them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from dsh.agent import PromptDecision, PromptSubmit
from dsh.credentials import CredentialError, Secret
from dsh.frontend import front_end
from dsh.hooks import AGENT_PROMPT_SUBMIT
from dsh.kernel import Context, Next, Plugin, ServiceKey
from dsh.services import CREDENTIALS, SETTINGS, TOOLS
from dsh.tools import ToolDefinition
from plugins.mcp.config import PROJECT_FILE, TABLE, ConfigError, ServerConfig, read_table
from plugins.mcp.connection import Connection, Status
from plugins.mcp.service import McpService

__all__ = ["MCP", "Connection", "McpService", "ServerConfig", "Status", "plugin"]

MCP: ServiceKey[McpService] = ServiceKey("mcp")


def apply(ctx: Context, config: object) -> None:
    # The SDK logs a server's unreadable lines (anything it printed) with tracebacks on
    # the root logger, which would land on the terminal; each server's status carries
    # the reason instead.
    sdk_log = logging.getLogger("mcp")
    sdk_log.propagate = False
    if not sdk_log.handlers:
        sdk_log.addHandler(logging.NullHandler())
    settings = ctx.get(SETTINGS, None)
    servers: dict[str, ServerConfig] = {}
    problems: list[str] = []
    project_file: Path | None = None
    cwd = Path.cwd()
    if settings is not None:
        try:
            servers = read_table(settings.section(TABLE), settings.origin(TABLE))
        except ConfigError as error:
            problems.append(str(error))
        if settings.root is not None:
            cwd = settings.root
            if settings.trusted:
                project_file = settings.root / PROJECT_FILE
    credentials = ctx.get(CREDENTIALS, None)

    def lookup(name: str) -> Secret | None:
        if credentials is not None:
            try:
                found = credentials.resolve(name)
            except CredentialError:
                found = None
            if found is not None:
                return found.value
        value = os.environ.get(name)
        return Secret(value) if value else None

    tools = ctx.get(TOOLS)

    def register(name: str, tool: ToolDefinition) -> Callable[[], object]:
        return tools.register(name, tool)

    # Servers' tasks live in a child context made first, so it is disposed last: after
    # the effect below has asked each server to stop and waited for it.
    service = McpService(
        ctx.child(name="mcp:servers"),
        servers,
        register=register,
        lookup=lookup,
        cwd=cwd,
        project_file=project_file,
        problems=problems,
    )
    ctx.effect(lambda: service.aclose)
    ctx.provide(MCP, service)

    async def wait_for_servers(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        # The TUI shows the prompt at once and tools join as servers come up; any other
        # front end (dsh -p above all) sends its first request with every server's
        # tools or its failure known.
        shown = front_end(submit.agent)
        if shown is None or shown.kind != "tui":
            await service.settled()
        return await next_()

    ctx.on(AGENT_PROMPT_SUBMIT, wait_for_servers)
    service.start()


plugin = Plugin(
    name="mcp",
    description="MCP servers' tools, as mcp__<server>__<tool>",
    inject=(TOOLS,),
    optional=(SETTINGS, CREDENTIALS),
    provides=(MCP,),
    apply=apply,
)
