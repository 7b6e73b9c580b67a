"""The core's services, each under its typed key: ``ctx.get(TOOLS)`` is a ``ToolView``.

This module is public API. A key is the one way to reach a service: ``ctx.get(KEY)``
(``ctx.get(KEY, None)`` when it may be absent), and in a plugin's definition
``inject=(KEY, ...)``, ``optional=...``, ``provides=...``. A plugin that provides a
service of its own declares its key the same way and exports it for others::

    JOBS: ServiceKey[JobTable] = ServiceKey("jobs")

A service that binds to its caller is found as its view (a ``ToolView`` for the
``ToolService``), so what the caller registers through it is undone with the caller.

Each key is declared beside its service, in the service's own module, and only
gathered here; a module of the core imports a key from there, never from this
catalogue, which imports every layer.
"""

from __future__ import annotations

from dsh.agent.service import AGENTS
from dsh.checkpoints.service import CHECKPOINTS
from dsh.commands import COMMANDS
from dsh.credentials import CREDENTIALS
from dsh.host import HOST
from dsh.kernel import ServiceKey
from dsh.llm.service import LLM
from dsh.prompt import PROMPT
from dsh.sandbox.service import SANDBOX
from dsh.session.store import SESSIONS
from dsh.settings import SETTINGS
from dsh.tools.approval import APPROVALS
from dsh.tools.files import WORKSPACE_FILES
from dsh.tools.questions import QUESTIONS
from dsh.tools.runner import COMMAND_RUNNER
from dsh.tools.service import TOOLS

__all__ = [
    "AGENTS",
    "APPROVALS",
    "CHECKPOINTS",
    "COMMANDS",
    "COMMAND_RUNNER",
    "CREDENTIALS",
    "HOST",
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
