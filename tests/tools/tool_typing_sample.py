"""Checked by ``test_tool_typing``: a tool's functions must take its arguments model.

The lines that end ``# refused`` must be type errors, and no other line.
"""

from __future__ import annotations

from pydantic import BaseModel

from dsh.tools import Action, ToolContext, ToolDefinition


class Count(BaseModel):
    path: str


class Other(BaseModel):
    url: str


async def count(arguments: Count, context: ToolContext) -> str:
    return arguments.path


async def fetch(arguments: Other, context: ToolContext) -> str:
    return arguments.url


FITS = ToolDefinition(
    name="count",
    description="Count.",
    arguments=Count,
    execute=count,
    describe=lambda arguments, context: Action(risk="read", summary=arguments.path),
)
WRONG_EXECUTE = ToolDefinition(
    name="count",
    description="Count.",
    arguments=Count,
    execute=fetch,  # refused
)
WRONG_DESCRIBE = ToolDefinition(
    name="count",
    description="Count.",
    arguments=Count,
    execute=count,
    describe=lambda arguments, context: Action(risk="read", summary=arguments.url),  # refused
)
ANY_TOOLS: list[ToolDefinition] = [FITS]
"""A bare ToolDefinition is any tool, as plugins written before it was generic say."""
