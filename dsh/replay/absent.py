"""Tools the recording offered that the replaying runtime does not have.

A session's tools come from its plugins and MCP servers; a replay runs with the
plugins this dsh finds and the servers its settings name, and a remote server, a
test's own server or a plugin of another machine may be gone. Such a tool is offered
as the recording offered it (the definition its ``request/header`` logged), so the
requests are compared on what the code builds rather than on what is installed here;
its calls are answered from the log with recorded tools, and with an error with live
ones (nothing here can run it). The report names each.

Only a name the runtime lacks altogether is stood in for: a tool this dsh has keeps
its own definition, so a changed schema still shows as a difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dsh.llm import ToolSchema
from dsh.tools import AnyArguments, JsonSchemaTool, ToolContext, ToolError, ToolOutput

UNAVAILABLE = "REPLAY_UNAVAILABLE"
"""The error code of a call to a stood-in tool that had to run (``--tools live``, or
past a fork): nothing in the replay can run it."""


def stood_in(recorded: ToolSchema) -> JsonSchemaTool:
    """The stand-in for ``recorded``: offered as logged, and a call that reaches it
    (no recorded answer took it) is answered with an error."""
    name = recorded.name

    async def execute(arguments: Any, context: ToolContext) -> ToolOutput:
        raise ToolError(
            f"{name} is not available in this replay: its plugin or MCP server is missing",
            UNAVAILABLE,
        )

    return JsonSchemaTool(
        name=name,
        description=recorded.description,
        arguments=AnyArguments,
        execute=execute,
        parameters=dict(recorded.parameters),
    )


def first_definitions(offered: Iterable[Sequence[ToolSchema] | None]) -> dict[str, ToolSchema]:
    """Each tool name the requests offered, with the first definition offered for it,
    in the order first offered."""
    found: dict[str, ToolSchema] = {}
    for tools in offered:
        for tool in tools or ():
            found.setdefault(tool.name, tool)
    return found
