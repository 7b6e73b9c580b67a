"""What a tool is: a name, a description, a pydantic model of its arguments, and an
``execute`` coroutine. The arguments model's JSON Schema is what the model sees.

A tool that changes anything says what a call would do with ``describe``: an
:class:`Action` (its risk, a one-line summary, the command or a diff, the paths it
writes). A read-only tool that opens files by path says which (``reads``), so secret
files can be refused or asked for. Permission rules and the approval dialog work from
that, never from the raw arguments.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from dsh.agent_handle import AgentHandle
from dsh.kernel import Context
from dsh.llm import Block, CallId, SessionId, ToolSchema, UserMessage
from dsh.policy.action import Action as Action
from dsh.policy.action import Escalation as Escalation
from dsh.policy.action import Risk as Risk
from dsh.policy.rules import Rule
from dsh.sandbox.policy import Widening
from dsh.tools.presentation import CallResult, Presentation

TOOL_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "fetch", "other"]

CHANGING_KINDS: frozenset[ToolKind] = frozenset({"edit", "delete", "move", "execute"})
"""Kinds that say the tool changes something: a read-only tool cannot be one."""
READING_KINDS: frozenset[ToolKind] = frozenset({"read", "search"})
"""Kinds that say the tool only looks: a tool that is not read-only cannot be one
(an editor would show its calls as harmless)."""


class ToolError(Exception):
    """Raised by a tool for a failure the model should read: ``code`` routes it."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class ToolContext:
    """What a running tool may use: who called it, where, and how to stop."""

    call_id: CallId
    agent: AgentHandle | None
    """The agent whose turn made the call; None for a call made outside any agent (a
    tool run directly, as by a test)."""
    cwd: Path
    signal: asyncio.Event
    """Set when the turn is cancelled: long-running tools stop and return."""
    session_id: SessionId = field(default_factory=lambda: SessionId(""))
    services: Context | None = None
    """The calling agent's context: ``services.get(JOBS)`` and the like."""
    spill: Callable[[str, str], Path] | None = None
    """Save a large text whole (``spill(text, label)``) and get its path."""
    progress: Callable[[str], None] = field(default=lambda _: None)
    """Say how far the call got (a line on its card; see ``dsh.agent.progress``)."""
    allow: tuple[Rule, ...] = ()
    """Permission rules the call's turn adds to the settings' allow rules (a custom
    command's ``allowed-tools``); they never outweigh a deny rule or a protection."""
    widening: Widening | None = None
    """What the person approved beyond the sandbox for this call (set by the pipeline
    after approval, never by the model): an escalation, or ``unsandboxed`` when the
    sandbox cannot start. A tool passes it to ``Sandbox.wrap``."""
    turn: int | None = None
    """The turn the call's effects belong to, and its step: the pipeline takes the
    workspace's checkpoint for them before a call with effects runs. None (a command
    the person runs at the prompt): no checkpoint, as for an edit by hand."""
    step: int = 1


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result. ``content`` is what the model reads."""

    content: str | tuple[Block, ...]
    is_error: bool = False
    meta: Any = None
    """Tool-private, JSON-safe data for UIs (a diff, a file list); never sent to the model."""
    additional_contexts: tuple[UserMessage, ...] = ()
    """Context that earns the turn one more step, entered before it."""
    spilled: bool = False
    """The tool spilled its own output already; the pipeline will not spill it again."""


@dataclass(frozen=True)
class ClaudeCodeName:
    """What Claude Code calls a tool that does what this one does, and its arguments:
    hook matchers, hook scripts and permission rules written for Claude Code name a
    tool so (``Bash``, ``tool_input.file_path``), and apply to this one as written
    (docs/hooks.md has the table)."""

    name: str
    fields: tuple[tuple[str, str], ...] = ()
    """``(dsh's argument, Claude Code's field)`` for each argument named otherwise."""
    older: tuple[str, ...] = ()
    """Names Claude Code gave the tool before (``Task`` for ``Agent``), which matchers
    and rules written then still use."""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.older)

    def to_claude(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments as Claude Code names them (the others as they are)."""
        renamed = dict(self.fields)
        return {renamed.get(key, key): value for key, value in arguments.items()}

    def from_claude(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Fields a hook wrote in Claude Code's names (``updatedInput``) as dsh's arguments."""
        back = {theirs: ours for ours, theirs in self.fields}
        return {back.get(key, key): value for key, value in fields.items()}


Arguments = TypeVar("Arguments", bound=BaseModel, default=Any)
"""A tool's arguments model. Its default keeps a bare ``ToolDefinition`` meaning "any
tool" (a registry, a hook), while a definition built from a model is typed by it."""

Execute = Callable[[Arguments, ToolContext], Awaitable["ToolOutput | str"]]
Describe = Callable[[Arguments, ToolContext], "Awaitable[Action] | Action"]


@dataclass(frozen=True)
class ToolDefinition(Generic[Arguments]):
    """One tool. ``execute`` and ``describe`` receive the call's arguments validated
    against ``arguments``, typed as that model: a function written for another model
    does not type-check."""

    name: str
    description: str
    arguments: type[Arguments]
    execute: Execute[Arguments]
    read_only: bool = False
    """True when the tool changes nothing: such calls may run side by side, unasked.
    This is the one declaration of the tool's nature: its calls must describe
    themselves as risk ``read`` (a call that says more is refused, not run), and its
    ``kind`` may not say it changes things."""
    kind: ToolKind = "other"
    describe: Describe[Arguments] | None = None
    """What a call would do; without it a tool that is not read-only counts as ``exec``."""
    timeout_s: float | None = None
    concludes_turn: bool = False
    """A successful call ends the turn after its step (no further model request)."""
    spill_output: bool = True
    """Large text results are saved to a file and previewed (off for a tool whose output
    is already a window on a file)."""
    present_call: Callable[[dict[str, Any]], Presentation | None] | None = None
    """How a UI shows the call before it ends (see :mod:`dsh.tools.presentation`)."""
    present_result: Callable[[dict[str, Any], CallResult], Presentation | None] | None = None
    """How a UI shows the ended call, from its arguments and logged result."""
    claude_code: ClaudeCodeName | None = None
    """What Claude Code calls such a tool and its arguments, if it has one like it; a
    tool whose name Claude Code gives it already (``mcp__server__tool``) needs none."""

    @property
    def names(self) -> tuple[str, ...]:
        """The names rules and hook matchers may give it: its own, then Claude Code's."""
        return (self.name, *(self.claude_code.names if self.claude_code else ()))

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {TOOL_NAME.pattern}")
        # ``read_only`` is the tool's nature; ``kind`` only names it for an editor, so
        # a kind that says otherwise is a mistake in the definition, refused here
        # rather than shown to a person as harmless (or run side by side).
        if self.read_only and self.kind in CHANGING_KINDS:
            raise ValueError(
                f"tool {self.name!r} is declared read_only=True but kind={self.kind!r}, "
                "which changes things: drop read_only or choose another kind"
            )
        if not self.read_only and self.kind in READING_KINDS:
            raise ValueError(
                f"tool {self.name!r} has kind={self.kind!r} but is not read_only: "
                "declare read_only=True (its calls then describe themselves as risk "
                '"read") or choose another kind'
            )

    @functools.cached_property
    def schema(self) -> ToolSchema:  # built once: every request sends it
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        for prop in parameters.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        return ToolSchema(name=self.name, description=self.description, parameters=parameters)

    async def action(self, arguments: Arguments, context: ToolContext) -> Action:
        if self.describe is None:
            if self.read_only:
                return Action(risk="read", summary=self.name)
            return Action(risk="exec", summary=f"{self.name} {arguments.model_dump_json()}")
        described = self.describe(arguments, context)
        action = await described if asyncio.iscoroutine(described) else described
        if self.read_only and action.risk != "read":  # type: ignore[union-attr]
            # Its calls already run side by side, unasked as reads: one that says it
            # does more is not run at all.
            raise ToolError(
                f"{self.name} is declared read-only, but describes this call as risk "
                f"{action.risk!r}; the tool's definition is wrong, so it was not run",  # type: ignore[union-attr]
                "TOOL_DEFINITION",
            )
        return action  # type: ignore[return-value]


class AnyArguments(BaseModel):
    """Whatever object the model sent, kept whole: for a :class:`JsonSchemaTool`,
    whose schema is not a pydantic model's (its server validates the arguments)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class JsonSchemaTool(ToolDefinition[AnyArguments]):
    """A tool offered with a JSON schema given as is (an MCP server's, a recorded
    one), not one built from its arguments model."""

    parameters: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def schema(self) -> ToolSchema:  # built once, as every tool's: every request sends it
        return ToolSchema(name=self.name, description=self.description, parameters=self.parameters)
