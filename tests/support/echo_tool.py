"""A test tool as a plugin, loaded by ``dsh -p`` through ``[plugins] modules``."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from dsh.kernel import Context, Plugin
from dsh.tools import ToolContext, ToolDefinition


class EchoArguments(BaseModel):
    text: str = Field(description="what to say back")
    delay: float = Field(default=0.0, description="seconds to wait first")


async def echo(arguments: EchoArguments, context: ToolContext) -> str:
    if arguments.delay:
        await asyncio.sleep(arguments.delay)
    return f"echo: {arguments.text}"


def apply(ctx: Context, config: object) -> None:
    ctx.tools.register(
        "echo",
        ToolDefinition(
            name="echo",
            description="Say the text back.",
            arguments=EchoArguments,
            execute=echo,
            read_only=True,
        ),
    )


plugin = Plugin(name="echo-tool", inject=("tools",), apply=apply)
