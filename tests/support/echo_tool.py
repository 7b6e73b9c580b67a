"""A test tool as a plugin, loaded by ``dsh -p`` through ``[plugins] modules``."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from dsh.kernel import Context, Plugin
from dsh.services import TOOLS
from dsh.tools import Action, ToolContext, ToolDefinition


class EchoArguments(BaseModel):
    text: str = Field(description="what to say back")
    delay: float = Field(default=0.0, description="seconds to wait first")


async def echo(arguments: EchoArguments, context: ToolContext) -> str:
    if arguments.delay:
        await asyncio.sleep(arguments.delay)
    return f"echo: {arguments.text}"


async def shout(arguments: EchoArguments, context: ToolContext) -> str:
    return arguments.text.upper()


def describe_shout(arguments: EchoArguments, context: ToolContext) -> Action:
    # Counts as running a command, so it needs approval unless a mode or rule allows it.
    return Action(risk="exec", summary=f"shout {arguments.text}", command=f"shout {arguments.text}")


def apply(ctx: Context, config: object) -> None:
    ctx.get(TOOLS).register(
        "echo",
        ToolDefinition(
            name="echo",
            description="Say the text back.",
            arguments=EchoArguments,
            execute=echo,
            read_only=True,
        ),
    )

    ctx.get(TOOLS).register(
        "shout",
        ToolDefinition(
            name="shout",
            description="Say the text back, loudly. Needs approval.",
            arguments=EchoArguments,
            execute=shout,
            describe=describe_shout,
        ),
    )


plugin = Plugin(name="echo-tool", inject=(TOOLS,), apply=apply)
