"""The running process: a root context with the core services, and the loaded plugins."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dsh.agent import AgentOptions, AgentService
from dsh.commands import CommandService
from dsh.credentials import CredentialStore
from dsh.kernel import Candidate, Context, PluginHost, discover
from dsh.llm import LlmService
from dsh.paths import dsh_home
from dsh.processes import sweep
from dsh.prompt import PromptService, register_core_sections
from dsh.services import (
    AGENTS,
    APPROVALS,
    COMMANDS,
    CREDENTIALS,
    LLM,
    PROMPT,
    QUESTIONS,
    SESSIONS,
    SETTINGS,
    TOOLS,
)
from dsh.session import SessionStore
from dsh.session.store import session_backend
from dsh.settings import Settings, SettingsError, load_settings
from dsh.tools import ToolService
from dsh.tools.approval import ApprovalService
from dsh.tools.permissions import PermissionMode, Rule, RuleError
from dsh.tools.questions import QuestionService
from dsh.tools.spill import SpillStore


@dataclass
class Runtime:
    root: Context
    plugins: PluginHost
    sessions: SessionStore
    llm: LlmService
    agents: AgentService

    async def aclose(self) -> None:
        """Stop agents, unload plugins (last loaded first), then close storage and the core."""
        await self.agents.aclose()
        await self.plugins.unload_all()
        await self.root.dispose()


async def start_runtime(
    *,
    home: Path | None = None,
    cwd: Path | None = None,
    candidates: Iterable[Candidate] | None = None,
    plugin_configs: Mapping[str, Mapping[str, Any]] | None = None,
    disabled_plugins: Iterable[str] = (),
    permission_mode: PermissionMode | None = None,
    settings: Settings | None = None,
) -> Runtime:
    """Build the root context with the core services and load plugins (discovered
    unless ``candidates`` is given), configured from the settings documents unless
    ``plugin_configs`` is given. Storage is touched only when first used.

    ``settings`` are those the front end loaded (and settled the project's trust
    for, see :mod:`dsh.ui.trusting`); without them the settings are loaded here, a
    project's own configuration applying only if the project is trusted.

    Raises :class:`~dsh.settings.SettingsError` for a settings file it cannot use.
    """
    data = home or dsh_home()
    where = cwd or Path.cwd()
    if settings is None:
        settings = load_settings(data, where)
    origins: dict[str, str] = {}
    if plugin_configs is None:
        plugin_configs = settings.plugin_configs()
        origins = {name: settings.origin("plugins", name) for name in plugin_configs}
        disabled_plugins = [*disabled_plugins, *settings.disabled_plugins()]
    else:
        # Given by the program itself (the demo's scripted server): the user's own.
        own = {**settings.own, "plugins": {**settings.own_section("plugins"), **plugin_configs}}
        settings = replace(settings, own=own)
    root = Context(name="core")
    root.provide(SETTINGS, settings)
    root.provide(CREDENTIALS, CredentialStore(data, where, project_env=settings.trusted))
    llm = LlmService(root)
    root.provide(LLM, llm)
    sessions = SessionStore.at(data, session_backend(), pricing=llm.cost)
    root.provide(SESSIONS, sessions)
    root.effect(lambda: sessions.aclose)
    approvals = _approvals(root, settings, permission_mode, data)
    root.provide(APPROVALS, approvals)
    root.provide(QUESTIONS, QuestionService(root))
    tools = ToolService(root, approvals=approvals, spill=SpillStore(data))
    root.provide(TOOLS, tools)
    prompt = PromptService(root, tools=tools.schemas)
    root.provide(PROMPT, prompt)  # each caller gets its own PromptView
    register_core_sections(prompt.bind_context(root))
    agent_settings = settings.section("agent")
    try:
        defaults = AgentOptions.model_validate(agent_settings)
    except ValueError as error:
        raise SettingsError(f"{settings.origin('agent')} [agent]: {error}") from None
    agents = AgentService(
        root, llm=llm, tools=tools, prompt=prompt, sessions=sessions, defaults=defaults
    )
    root.provide(AGENTS, agents)
    root.provide(COMMANDS, CommandService())  # each context gets its own view
    # What an earlier dsh that died left running (if its watchdog died with it) ends
    # now, before anything here starts children of its own.
    await asyncio.to_thread(sweep, data)
    host = PluginHost(root)
    await host.load(
        discover(settings.plugin_modules()) if candidates is None else candidates,
        configs=plugin_configs,
        disabled=disabled_plugins,
        config_origins=origins,
    )
    return Runtime(root, host, sessions, llm, agents)


def _approvals(
    root: Context, settings: Settings, mode: PermissionMode | None, home: Path
) -> ApprovalService:
    """The permission mode and rules: ``[permissions]`` in settings, the flag over it."""
    section = settings.section("permissions")
    where = settings.origin("permissions")
    try:
        allow = [Rule.parse(text) for text in section.get("allow", [])]
        deny = [Rule.parse(text) for text in section.get("deny", [])]
        return ApprovalService(
            root, mode or section.get("mode", "default"), allow=allow, deny=deny, home=home
        )
    except (RuleError, ValueError, TypeError) as error:
        raise SettingsError(f"{where} [permissions]: {error}") from None
