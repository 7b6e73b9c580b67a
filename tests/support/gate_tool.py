"""A test tool that holds a turn until the test lets it go: ``gate`` waits for a file.

Loaded by a real ``dsh`` through ``[plugins] modules``. The model calls
``gate {"path": ...}``; the call waits until that file exists, so the test can act
while the turn is in the middle of a step (free the disk, read the screen) without
racing the model's stream. Read-only: it changes nothing, so the loop runs it without
first waiting for the log to be synced. The wait is bounded, as every test wait is.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from pydantic import BaseModel, Field

from dsh.kernel import Context, Plugin
from dsh.services import TOOLS
from dsh.tools import ToolContext, ToolDefinition
from tests.support.waits import HANG_S

POLL_S = 0.02


class GateArguments(BaseModel):
    path: str = Field(description="the file to wait for")


async def gate(arguments: GateArguments, context: ToolContext) -> str:
    opened = Path(arguments.path)
    deadline = time.monotonic() + HANG_S
    while not opened.exists():
        if time.monotonic() > deadline:
            return f"the gate {opened} stayed shut"
        await asyncio.sleep(POLL_S)
    return "the gate opened"


def apply(ctx: Context, config: object) -> None:
    ctx.get(TOOLS).register(
        "gate",
        ToolDefinition(
            name="gate",
            description="Wait until a file exists.",
            arguments=GateArguments,
            execute=gate,
            read_only=True,
        ),
    )


plugin = Plugin(name="gate-tool", inject=(TOOLS,), apply=apply)
