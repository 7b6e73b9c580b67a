"""A test tool whose output is as long as asked, from a short call: what fills a
context window in real sessions (a big file read, a long test log)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from dsh.kernel import Context, Plugin
from dsh.services import TOOLS
from dsh.tools import ToolContext, ToolDefinition


class DumpArguments(BaseModel):
    size: int = Field(description="how many characters to print", ge=1)
    label: str = Field(default="row", description="what each line says")


def dump_text(size: int, label: str = "row") -> str:
    lines = []
    length = 0
    number = 0
    while length < size:
        line = f"{label} {number:06d}: the quick brown fox jumps over the lazy dog\n"
        lines.append(line)
        length += len(line)
        number += 1
    return "".join(lines)[:size]


async def dump(arguments: DumpArguments, context: ToolContext) -> str:
    return dump_text(arguments.size, arguments.label)


def apply(ctx: Context, config: object) -> None:
    ctx.get(TOOLS).register(
        "dump",
        ToolDefinition(
            name="dump",
            description="Print a long text.",
            arguments=DumpArguments,
            execute=dump,
            read_only=True,
            spill_output=False,  # the whole text stays in history, however long
        ),
    )


plugin = Plugin(name="dump-tool", inject=(TOOLS,), apply=apply)
