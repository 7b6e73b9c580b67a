"""Tools: their definition, the registry, and running a model's call.

This module is public API: plugins import from ``dsh.tools``.
"""

from __future__ import annotations

from dsh.policy.permissions import MODES, PermissionMode, Rule, RuleError, parse_rules
from dsh.tools.approval import denied_reads
from dsh.tools.definition import (
    Action,
    AnyArguments,
    ClaudeCodeName,
    Escalation,
    JsonSchemaTool,
    Risk,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolKind,
    ToolOutput,
)
from dsh.tools.environment import (
    child_environment,
    scrubbed,
    user_passthrough,
    with_safe_git,
)
from dsh.tools.presentation import (
    AgentView,
    CallResult,
    ChecklistView,
    CommandView,
    DiffView,
    FileDiff,
    Presentation,
    ScreenView,
    TextView,
)
from dsh.tools.runner import CommandOutcome, CommandRun, CommandRunFailed, CommandRunner
from dsh.tools.service import (
    Allow,
    Amend,
    Ask,
    BlockResult,
    CallOutcome,
    Deny,
    PostHook,
    PreHook,
    PreVerdict,
    Rewrite,
    ToolService,
    ToolView,
    parse_arguments,
)

__all__ = [
    "MODES",
    "Action",
    "AgentView",
    "Allow",
    "Amend",
    "AnyArguments",
    "Ask",
    "BlockResult",
    "CallOutcome",
    "CallResult",
    "ChecklistView",
    "ClaudeCodeName",
    "CommandOutcome",
    "CommandRun",
    "CommandRunFailed",
    "CommandRunner",
    "CommandView",
    "Deny",
    "DiffView",
    "Escalation",
    "FileDiff",
    "JsonSchemaTool",
    "PermissionMode",
    "PostHook",
    "PreHook",
    "PreVerdict",
    "Presentation",
    "Rewrite",
    "Risk",
    "Rule",
    "RuleError",
    "ScreenView",
    "TextView",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolKind",
    "ToolOutput",
    "ToolService",
    "ToolView",
    "child_environment",
    "denied_reads",
    "parse_arguments",
    "parse_rules",
    "scrubbed",
    "user_passthrough",
    "with_safe_git",
]
