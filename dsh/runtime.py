"""The running process: a root context with the core services, and the loaded plugins."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dsh.agent import AgentService
from dsh.agent.service import AGENTS
from dsh.checkpoints import Checkpoints
from dsh.checkpoints.service import CHECKPOINTS
from dsh.commands import COMMANDS, CommandService
from dsh.credentials import CREDENTIALS, CredentialStore
from dsh.host import HOST, HostFacts
from dsh.kernel import Candidate, Context, PluginHost, discover
from dsh.llm import LlmService
from dsh.llm.service import LLM
from dsh.paths import dsh_home
from dsh.policy.git_config import user_git_config
from dsh.policy.permissions import PermissionMode, Rule, RuleError
from dsh.processes import sweep
from dsh.prompt import PROMPT, PromptService, register_core_sections
from dsh.sandbox import Policy, Sandbox
from dsh.sandbox.service import SANDBOX
from dsh.session import SessionStore
from dsh.session.store import SESSIONS
from dsh.settings import SETTINGS, Settings, SettingsError, load_settings
from dsh.settings_tables import PermissionsTable
from dsh.tools import ToolService
from dsh.tools.approval import APPROVALS, ApprovalService
from dsh.tools.files import WORKSPACE_FILES, DiskFiles
from dsh.tools.questions import QUESTIONS, QuestionService
from dsh.tools.service import TOOLS
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
    sandbox: Policy | None = None,
    settings: Settings | None = None,
    host: HostFacts | None = None,
    retry_pause: Callable[[float], Awaitable[Any]] | None = None,
) -> Runtime:
    """Build the root context with the core services and load plugins (discovered
    unless ``candidates`` is given), configured from the settings documents unless
    ``plugin_configs`` is given. Storage is touched only when first used. ``sandbox``
    (the ``--sandbox`` flag) replaces the policy of ``[sandbox]``; the sandbox itself
    starts at its first use (:meth:`dsh.sandbox.Sandbox.ready`).

    ``settings`` are the process's, loaded once by the front end (which settled the
    project's trust, see :mod:`dsh.ui.trusting`) and handed down: the runtime reads
    their core tables, configures the plugins from them and provides them as the
    ``settings`` service. Without them (tests, embedding) they are loaded here, a
    project's own configuration applying only if the project is trusted.

    ``host`` stands in for this machine's facts (a replay gives the recorded ones);
    ``retry_pause`` for the wait between a failed model attempt and its retry (a replay
    serves the recorded failures and does not wait out their delays).

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
    facts = host or HostFacts.this_machine()
    root.provide(HOST, facts)
    root.provide(CREDENTIALS, CredentialStore(data, where, project_env=settings.trusted))
    llm = LlmService(root) if retry_pause is None else LlmService(root, sleep=retry_pause)
    root.provide(LLM, llm)
    sessions = SessionStore.at(data, settings.storage.backend, pricing=llm.cost, host=facts)
    root.provide(SESSIONS, sessions)
    root.effect(lambda: sessions.aclose)
    approvals = _approvals(
        root, settings.permissions, settings.origin("permissions"), permission_mode, data
    )
    root.provide(APPROVALS, approvals)
    root.provide(QUESTIONS, QuestionService(root))
    tools = ToolService(root, approvals=approvals, spill=SpillStore(data))
    root.provide(TOOLS, tools)
    prompt = PromptService(root, tools=tools.schemas)
    root.provide(PROMPT, prompt)  # each caller gets its own PromptView
    register_core_sections(prompt.bind_context(root), mode=lambda: approvals.mode)
    agents = AgentService(
        root, llm=llm, tools=tools, prompt=prompt, sessions=sessions, defaults=settings.agent
    )
    root.provide(AGENTS, agents)
    root.provide(COMMANDS, CommandService())  # each context gets its own view
    root.provide(WORKSPACE_FILES, DiskFiles())  # a front end may stand in for an agent
    table = settings.sandbox
    contained = Sandbox(
        table, sandbox or table.policy, root=settings.root or where.resolve(), home=data
    )
    root.provide(SANDBOX, contained)
    root.effect(lambda: contained.aclose)
    checkpoints = Checkpoints(settings.checkpoints, home=data)
    root.provide(CHECKPOINTS, checkpoints)
    root.effect(lambda: checkpoints.aclose)
    # What an earlier dsh that died left running (if its watchdog died with it) ends
    # now, before anything here starts children of its own. The user's own git
    # settings, which every child's git environment carries, are read in a thread
    # (once: a child's environment is built on the loop) and not waited for: ready
    # does not wait on two git runs; a child started before they end waits for them.
    root.spawn(asyncio.to_thread(user_git_config), name="user-git-config")
    await asyncio.to_thread(sweep, data)
    plugins = PluginHost(root)
    await plugins.load(
        discover(settings.plugin_modules()) if candidates is None else candidates,
        configs=plugin_configs,
        disabled=disabled_plugins,
        config_origins=origins,
    )
    return Runtime(root, plugins, sessions, llm, agents)


def _approvals(
    root: Context, table: PermissionsTable, where: str, mode: PermissionMode | None, home: Path
) -> ApprovalService:
    """The permission mode and rules: ``[permissions]`` in settings, the flag over it."""
    try:
        allow = [Rule.parse(text) for text in table.allow]
        deny = [Rule.parse(text) for text in table.deny]
        return ApprovalService(root, mode or table.mode, allow=allow, deny=deny, home=home)
    except (RuleError, ValueError, TypeError) as error:
        raise SettingsError(f"{where} [permissions]: {error}") from None
