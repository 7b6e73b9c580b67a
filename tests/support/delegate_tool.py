"""A test tool that stands in for a subagent: ``delegate`` writes a child session (its
parent the calling session, origin ``subagent``) with one finished turn, and its card
is an :class:`~dsh.tools.presentation.AgentView` of that session."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dsh.kernel import Context, Plugin
from dsh.llm import SessionId
from dsh.services import SESSIONS, TOOLS
from dsh.tools import ToolContext, ToolDefinition, ToolOutput
from dsh.tools.presentation import AgentView, CallResult, Presentation
from tests.session.turns import complete_turn


class DelegateArguments(BaseModel):
    description: str = Field(description="a few words on what the child does")
    prompt: str = Field(description="the child's first message")
    reply: str = Field(description="what the child answers")


async def delegate(arguments: DelegateArguments, context: ToolContext) -> ToolOutput:
    assert context.services is not None
    sessions = context.services.get(SESSIONS)
    child = await sessions.create(
        str(context.cwd), parent=SessionId(context.session_id), origin="subagent"
    )
    complete_turn(child, arguments.prompt, arguments.reply, with_tool=False)
    await sessions.close(child)
    meta = {
        "session": child.id,
        "description": arguments.description,
        "status": "completed",
        "activity": [f"read {n}.py" for n in range(8)] + [arguments.reply],
    }
    return ToolOutput(content=arguments.reply, meta=meta)


def present(arguments: dict[str, Any], result: CallResult) -> Presentation | None:
    meta = result.meta
    if not isinstance(meta, dict) or not isinstance(meta.get("session"), str):
        return None
    return AgentView(
        title=str(meta.get("description", "")),
        session_id=meta["session"],
        status=meta.get("status"),
        lines=tuple(str(line) for line in meta.get("activity", [])),
    )


def apply(ctx: Context, config: object) -> None:
    ctx.get(TOOLS).register(
        "delegate",
        ToolDefinition(
            name="delegate",
            description="Hand a piece of work to a (pretend) subagent.",
            arguments=DelegateArguments,
            execute=delegate,
            read_only=True,
            present_result=present,
        ),
    )


plugin = Plugin(name="delegate-tool", inject=(TOOLS,), apply=apply)
