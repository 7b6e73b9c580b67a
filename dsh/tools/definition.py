"""What a tool is: a name, a description, a pydantic model of its arguments, and an
``execute`` coroutine. The arguments model's JSON Schema is what the model sees."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dsh.llm import Block, CallId, ToolSchema, UserMessage

TOOL_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")


@dataclass
class ToolContext:
    """What a running tool may use: who called it, where, and how to stop."""

    call_id: CallId
    agent: Any
    cwd: Path
    signal: asyncio.Event
    """Set when the turn is cancelled: long-running tools stop and return."""
    progress: Callable[[str], None] = field(default=lambda _: None)


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result. ``content`` is what the model reads."""

    content: str | tuple[Block, ...]
    is_error: bool = False
    meta: Any = None
    """Tool-private, JSON-safe data for UIs (a diff, a file list); never sent to the model."""
    additional_contexts: tuple[UserMessage, ...] = ()
    """Context that earns the turn one more step, entered before it."""


Execute = Callable[[Any, ToolContext], Awaitable["ToolOutput | str"]]


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    arguments: type[BaseModel]
    execute: Execute
    read_only: bool = False
    """True when the tool changes nothing: such calls may run side by side."""
    concludes_turn: bool = False
    """A successful call ends the turn after its step (no further model request)."""

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {TOOL_NAME.pattern}")

    @property
    def schema(self) -> ToolSchema:
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        return ToolSchema(name=self.name, description=self.description, parameters=parameters)
