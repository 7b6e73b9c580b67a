"""A server's tool as a dsh tool: its definition and what a call returns.

:func:`mcp_tool` makes the :class:`~dsh.tools.JsonSchemaTool` registered for one of a server's tools
(its schema the server's, normalised; read-only or destructive as the server's
annotations say), calling back into the connection to run it; :func:`tool_output`
turns the server's result into the call's output (text, and images stored as the
session's). Imports the SDK: loaded with :mod:`dsh_plugins.mcp.connection`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from pydantic import BaseModel

from dsh.llm import TextBlock
from dsh.tools import Action, AnyArguments, JsonSchemaTool, ToolContext, ToolOutput
from dsh_plugins.mcp.results import images_of, result_text
from dsh_plugins.mcp.schema import clean, normalise

MAX_DESCRIPTION = 4000
"""Characters of a tool's description offered to the model."""

ToolCall = Callable[[str, dict[str, Any], ToolContext], Awaitable[ToolOutput]]
"""Runs one of the server's tools by its own name: the connection's :meth:`call`."""


def mcp_tool(
    server: str, name: str, tool: types.Tool, *, timeout_s: float, call: ToolCall
) -> JsonSchemaTool:
    """The definition registered as ``name`` for the server's ``tool``."""
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    destructive = bool(hints and hints.destructive_hint) and not read_only
    description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION]
    original = tool.name

    def describe(arguments: Any, context: ToolContext) -> Action:
        shown = json.dumps(raw(arguments), ensure_ascii=False, sort_keys=True)
        summary = f"{server}: {original} {shown}"[:300]
        if read_only:
            return Action(risk="read", summary=summary)
        return Action(
            risk="external",
            summary=summary,
            details=f"MCP server {server}, tool {original}\narguments: {shown}",
            unchecked=(
                f"the MCP server {server} marks {original} as destructive" if destructive else None
            ),
        )

    async def execute(arguments: Any, context: ToolContext) -> ToolOutput:
        return await call(original, raw(arguments), context)

    return JsonSchemaTool(
        name=name,
        description=f"{description}\n\n(MCP server {server}, tool {original})",
        arguments=AnyArguments,
        execute=execute,
        read_only=read_only,
        kind="read" if read_only else "other",
        describe=describe,
        timeout_s=timeout_s,
        parameters=normalise(tool.input_schema),
    )


async def tool_output(
    server: str, tool: str, result: types.CallToolResult, context: ToolContext
) -> ToolOutput:
    """The call's output: the result's text, then any images it holds."""
    images, fate = await images_of(result, context, f"{clean(server)}-{clean(tool)}")
    text = result_text(result, fate)
    if not images:
        return ToolOutput(content=text, is_error=bool(result.is_error))
    return ToolOutput(content=(TextBlock(text=text), *images), is_error=bool(result.is_error))


def raw(arguments: Any) -> dict[str, Any]:
    """The model's arguments as the plain object the server is sent."""
    return arguments.model_dump() if isinstance(arguments, BaseModel) else dict(arguments)
