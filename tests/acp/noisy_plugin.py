"""A plugin that prints on stdout, and a tool whose program does: neither may reach
an editor's protocol stream (``dsh acp``)."""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic import BaseModel

from dsh.kernel import Context, Plugin
from dsh.services import TOOLS
from dsh.tools import ToolContext, ToolDefinition


class NoArguments(BaseModel):
    pass


async def chatter(arguments: NoArguments, context: ToolContext) -> str:
    print("stray print from a tool")
    os.write(1, b"stray bytes on fd 1\n")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "print('a child on stdout')"
    )  # its stdout and stdin are dsh's own
    await child.wait()
    return "chattered"


def apply(ctx: Context, config: object) -> None:
    print("stray print from a plugin")
    ctx.get(TOOLS).register(
        "chatter",
        ToolDefinition(
            name="chatter",
            description="Prints.",
            arguments=NoArguments,
            execute=chatter,
            read_only=True,
        ),
    )


plugin = Plugin(name="noisy", inject=(TOOLS,), apply=apply)
