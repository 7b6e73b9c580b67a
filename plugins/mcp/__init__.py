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
and argument schemas), ``status`` (a server's state, without the SDK), ``results``
(a result as text and images), ``connection`` (one server's lifecycle: the SDK is
imported with it, in a thread, only when a server is configured; beside it
``transports``, ``stderr``, ``catalogue`` (its lists) and ``tool_adapter``),
``service`` (all of them),
``resources`` (``@server:uri`` in a prompt), ``prompts`` (a server's prompts as
commands), ``auth`` (OAuth tokens of remote servers, in ``$DSH_HOME/mcp-auth``),
``login`` (``dsh mcp login``'s browser side), ``guard`` (no tool reads the tokens),
``cli`` (``dsh mcp``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dsh import held_secrets
from dsh.agent import AgentHandle, MentionChoice, PromptAllow, PromptDecision, PromptSubmit
from dsh.commands import Command, CommandContext, CommandError, parse_command
from dsh.control_chars import visible
from dsh.credentials import CredentialError, Secret
from dsh.doctor import Check, DoctorAsk
from dsh.frontend import front_end
from dsh.held_secrets import looks_secret
from dsh.hooks import (
    AGENT_PROMPT_SUBMIT,
    COMMANDS_SETTLE,
    DOCTOR_CHECK,
    PROMPT_MENTIONS,
    TOOL_POST_EXECUTE,
    TOOL_PRE_EXECUTE,
)
from dsh.kernel import CliCommand, Context, Next, Plugin
from dsh.llm import UserSource, user_text
from dsh.services import COMMANDS, CREDENTIALS, SETTINGS, TOOLS
from dsh.tools import ToolDefinition
from dsh_plugins.mcp import guard
from dsh_plugins.mcp.config import (
    PROJECT_FILE,
    TABLE,
    ConfigError,
    ServerConfig,
    WithheldVariable,
    read_table,
)
from dsh_plugins.mcp.doctor import mcp_checks
from dsh_plugins.mcp.service import MCP, McpService, status_lines
from dsh_plugins.mcp.status import Status

__all__ = ["MCP", "McpService", "ServerConfig", "Status", "plugin"]


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
    ignored_file: Path | None = None
    own: set[str] = set()
    cwd = Path.cwd()
    if settings is not None:
        try:
            servers = read_table(settings.section(TABLE), settings.origin(TABLE))
            mine = read_table(settings.own_section(TABLE), settings.origin(TABLE))
            # A server is the user's when the user's own layers configure it as it
            # runs; one a trusted project added or changed is the project's.
            own = {name for name, config in servers.items() if mine.get(name) == config}
        except ConfigError as error:
            problems.append(str(error))
        if settings.root is not None:
            cwd = settings.root
            if settings.trusted:
                project_file = settings.root / PROJECT_FILE
            else:
                ignored_file = settings.root / PROJECT_FILE
    credentials = ctx.get(CREDENTIALS, None)

    def lookup(name: str) -> Secret | None:
        if credentials is not None:
            try:
                found = credentials.resolve(name)
            except CredentialError:
                found = None
            if found is not None:
                return found.value
        value = held_secrets.value_of(name)
        return Secret(value) if value else None

    def project_lookup(name: str) -> Secret | None:
        """For a project's server: a variable of the environment, never one of the
        user's credentials (what looks like a secret, what dsh holds, what its
        credential files hold)."""
        if looks_secret(name) or held_secrets.held(name) is not None:
            raise WithheldVariable(name)
        if credentials is not None:
            try:
                found = credentials.resolve(name)
            except CredentialError:
                raise WithheldVariable(name) from None
            if found is not None and found.source.kind != "environment":
                raise WithheldVariable(name)
        value = os.environ.get(name)
        return Secret(value) if value else None

    tools = ctx.get(TOOLS)

    def register(name: str, tool: ToolDefinition) -> Callable[[], object]:
        return tools.register(name, tool)

    commands = ctx.get(COMMANDS, None)

    def register_command(name: str, command: Command) -> Callable[[], object]:
        assert commands is not None
        return commands.register(name, command)

    # Servers' tasks live in a child context made first, so it is disposed last: after
    # the effect below has asked each server to stop and waited for it.
    service = McpService(
        ctx.child(name="mcp:servers"),
        servers,
        register=register,
        register_command=register_command if commands is not None else None,
        lookup=lookup,
        project_lookup=project_lookup,
        own=own,
        cwd=cwd,
        project_file=project_file,
        ignored_file=ignored_file,
        problems=problems,
    )
    ctx.effect(lambda: service.aclose)
    ctx.provide(MCP, service)

    reported: list[bool] = []

    async def wait_for_servers(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        # The TUI and plain mode answer at once and tools join as servers come up (a
        # person sees /mcp); dsh -p, an editor (dsh acp), and an agent no front end
        # shows, send the first request with every server's tools or failure known.
        shown = front_end(submit.agent)
        if shown is not None and shown.tool_servers:
            await service.offer(shown.tool_servers)  # the editor's own servers
        if shown is None or shown.settles_tools_first:
            await service.settled()
        if shown is not None and shown.kind == "headless" and not reported:
            reported.append(True)
            _report(service)
        decision = await next_()
        message = submit.message
        if not isinstance(decision, PromptAllow) or not isinstance(message.source, UserSource):
            return decision  # blocked, or not a person's own words
        if decision.content is not None:
            message = message.model_copy(update={"content": decision.content})
        text = message.text()
        expanded = await _expand_prompt(service, text)
        if expanded is not None:
            # A server's prompt named before the server was ready (dsh -p sends it at
            # once): the front end took it for a message; it is the prompt's text.
            return replace(decision, content=user_text(expanded).content)
        if "@" not in text:
            return decision
        if not any(c.state == "ready" for c in service.connections.values()):
            return decision
        from dsh_plugins.mcp.resources import attach as attach_resources  # with the SDK

        extra = await attach_resources(text, service.connections)
        if not extra:
            return decision
        return replace(decision, additional_contexts=(*decision.additional_contexts, *extra))

    ctx.on(AGENT_PROMPT_SUBMIT, wait_for_servers)
    ctx.on(COMMANDS_SETTLE, service.settled)  # a server's prompts are commands

    def offer_resources(agent: AgentHandle, query: str) -> list[MentionChoice]:
        if not any(c.state == "ready" for c in service.connections.values()):
            return []  # (and the SDK may not be imported yet)
        from dsh_plugins.mcp.resources import mention_choices

        return mention_choices(query, service.connections)

    ctx.on(PROMPT_MENTIONS, offer_resources)

    async def doctor(ask: DoctorAsk) -> list[Check]:
        return await mcp_checks(service, ask)

    ctx.on(DOCTOR_CHECK, doctor)
    # The login tokens are this plugin's secret: no tool reads them to the model.
    ctx.on(TOOL_PRE_EXECUTE, guard.before)
    ctx.on(TOOL_POST_EXECUTE, guard.TokenWatch().after)
    if commands is not None:
        commands.register("mcp", mcp_command(service))
    service.start()


async def _expand_prompt(service: McpService, text: str) -> str | None:
    parsed = parse_command(text)
    if parsed is None:
        return None
    name, args = parsed
    for connection in service.connections.values():
        call = connection.prompts.get(name)
        if call is not None:
            try:
                return await call.text(args)
            except CommandError as error:
                return f"(The MCP prompt /{name} could not be used: {error})"
    return None


def _report(service: McpService) -> None:
    """dsh -p: a line on stderr for each server that failed or a problem in the
    configuration, as dsh -p reports settings it ignored."""
    failed = [s for s in service.statuses() if s.state in ("failed", "needs login")]
    if not failed and not service.problems:
        return
    lines = [f"mcp: {visible(p, one_line=True)}" for p in service.problems]
    for status in failed:
        reason = visible(status.reason or status.state, one_line=True)
        lines.append(f"mcp: {status.name} {status.state}: {reason}")
        for line in status.stderr.splitlines()[-5:]:
            lines.append(f"mcp:   stderr: {visible(line, one_line=True)}")
    sys.stderr.write("".join(f"{line}\n" for line in lines))
    sys.stderr.flush()


def mcp_command(service: McpService) -> Command:
    async def run(context: CommandContext, args: str) -> None:
        words = args.split()
        if words[:1] == ["restart"] and len(words) == 2:
            if not service.restart(words[1]):
                raise CommandError(f"no MCP server named {words[1]!r}")
            context.host.show(f"Restarting {words[1]}; /mcp shows how it goes.")
            return
        if words:
            raise CommandError("/mcp shows the servers; /mcp restart NAME starts one again")
        shown = front_end(context.agent)
        if shown is not None and shown.kind == "headless":
            await service.settled()  # `dsh -p /mcp`: how each start ended, not "starting"
        context.host.show("\n".join(status_lines(service)))

    return Command(
        name="mcp",
        description="MCP servers: state, tools, last error; restart one",
        run=run,
        arguments="[restart NAME]",
        recorded=False,
    )


def cli_command() -> CliCommand:
    # The command's module (tomlkit and argparse) is imported when dsh loads plugins;
    # small, and what it reads is only this module's own.
    from dsh_plugins.mcp.cli import COMMAND

    return COMMAND


plugin = Plugin(
    name="mcp",
    description="MCP servers' tools, as mcp__<server>__<tool>",
    inject=(TOOLS,),
    optional=(SETTINGS, CREDENTIALS, COMMANDS),
    provides=(MCP,),
    apply=apply,
    cli=(cli_command(),),
)
