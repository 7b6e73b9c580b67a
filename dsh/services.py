"""The core's services, each under its typed key: ``ctx.get(TOOLS)`` is a ``ToolView``.

This module is public API. A key is the one way to reach a service: ``ctx.get(KEY)``
(``ctx.get(KEY, None)`` when it may be absent), and in a plugin's definition
``inject=(KEY, ...)``, ``optional=...``, ``provides=...``. A plugin that provides a
service of its own declares its key the same way and exports it for others::

    JOBS: ServiceKey[JobTable] = ServiceKey("jobs")

A service that binds to its caller is found as its view (a ``ToolView`` for the
``ToolService``), so what the caller registers through it is undone with the caller.

The service types are imported here only for the type checker, because the modules
that define them use these keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh.kernel import ServiceKey

if TYPE_CHECKING:
    from dsh.agent import AgentService
    from dsh.checkpoints import Checkpoints
    from dsh.commands import CommandView
    from dsh.credentials import CredentialStore
    from dsh.llm.service import BoundLlmService
    from dsh.prompt import PromptView
    from dsh.sandbox import Sandbox
    from dsh.session import SessionStore
    from dsh.settings import Settings
    from dsh.tools import ToolView
    from dsh.tools.approval import BoundApprovals
    from dsh.tools.files import WorkspaceFiles
    from dsh.tools.questions import BoundQuestions
    from dsh.tools.runner import CommandRunner

__all__ = [
    "AGENTS",
    "APPROVALS",
    "CHECKPOINTS",
    "COMMANDS",
    "COMMAND_RUNNER",
    "CREDENTIALS",
    "LLM",
    "PROMPT",
    "QUESTIONS",
    "SANDBOX",
    "SESSIONS",
    "SETTINGS",
    "TOOLS",
    "WORKSPACE_FILES",
    "ServiceKey",
]

SETTINGS: ServiceKey[Settings] = ServiceKey("settings")
"""The settings as loaded (``settings.trusted``, ``own_section(...)``: the user's own)."""
CREDENTIALS: ServiceKey[CredentialStore] = ServiceKey("credentials")
"""API keys, resolved per use; values never print."""
LLM: ServiceKey[BoundLlmService] = ServiceKey("llm")
"""Model calls and provider routes (``register_adapter``)."""
SESSIONS: ServiceKey[SessionStore] = ServiceKey("sessions")
"""Stored sessions: create, open, fork, the catalog."""
APPROVALS: ServiceKey[BoundApprovals] = ServiceKey("approvals")
"""The permission mode and rules, and the approvers (``add_approver``)."""
QUESTIONS: ServiceKey[BoundQuestions] = ServiceKey("questions")
"""Questions for the person (``ask``), and the answerers (``set_answerer``)."""
TOOLS: ServiceKey[ToolView] = ServiceKey("tools")
"""The tool registry (``register``) and the tool hooks (``add_pre_hook``, ``add_post_hook``)."""
PROMPT: ServiceKey[PromptView] = ServiceKey("prompt")
"""System prompt sections, variables and context entries."""
AGENTS: ServiceKey[AgentService] = ServiceKey("agents")
"""Creating, resuming and disposing agents."""
COMMANDS: ServiceKey[CommandView] = ServiceKey("commands")
"""Slash commands (``register``)."""
WORKSPACE_FILES: ServiceKey[WorkspaceFiles] = ServiceKey("workspace-files")
"""Where the text of the workspace's files is read and written: the disk, or a front
end's stand-in for the agents it shows (an editor's buffers), on the agent's context."""
SANDBOX: ServiceKey[Sandbox] = ServiceKey("sandbox")
"""The OS sandbox every program the model starts runs in (``wrap``), its policy and
whether it works here (``ready``)."""
COMMAND_RUNNER: ServiceKey[CommandRunner] = ServiceKey("command-runner")
"""Where a tool's foreground shell commands run, when not here (an editor's terminals):
provided by a front end on an agent's scope; absent, a tool runs them itself."""
CHECKPOINTS: ServiceKey[Checkpoints] = ServiceKey("checkpoints")
"""Snapshots of the project's files before a turn's effects (``before_effect``), and
restoring them (``plan_undo``, ``plan_rewind``, ``restore``)."""
