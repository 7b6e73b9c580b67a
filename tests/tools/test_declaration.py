"""A tool is declared once: its name and its nature cannot disagree with themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh.llm import user_text
from dsh.runtime import Runtime
from dsh.services import TOOLS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import Action, ToolContext, ToolDefinition


class Note(BaseModel):
    text: str = ""


async def note(arguments: Note, context: ToolContext) -> str:
    return f"noted {arguments.text}"


def tool(name: str, **kwargs: object) -> ToolDefinition[Note]:
    return ToolDefinition(name=name, description="Note.", arguments=Note, execute=note, **kwargs)  # type: ignore[arg-type]


async def test_a_name_that_disagrees_with_the_definition_is_refused_at_registration(
    runtime: Runtime, fake_llm: FakeLLM
) -> None:
    tools = runtime.root.get(TOOLS)
    with pytest.raises(ValueError, match=r"registered as 'x'.*named 'y'"):
        tools.register("x", tool("y"))
    assert "x" not in tools.visible()
    assert "y" not in tools.visible()
    assert fake_llm.chat_requests == []  # refused before any model call


async def test_a_definition_registers_under_its_own_name_and_is_called_by_it(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime.root.get(TOOLS).register(tool("note", read_only=True))
    runtime.root.get(TOOLS).register("echo", tool("echo", read_only=True))  # the older form
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="note", arguments={"text": "a"})]))
    fake_llm.add(Reply(text="done"))
    agent = await runtime.agents.create(tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    offered = [t["function"]["name"] for t in fake_llm.chat_requests[0].body["tools"]]
    assert {"note", "echo"} <= set(offered)
    [result] = [m for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "tool"]
    assert result["content"] == "noted a"


def test_a_kind_that_contradicts_read_only_is_refused_with_both_named() -> None:
    with pytest.raises(ValueError, match=r"'w'.*read_only=True but kind='edit'"):
        tool("w", read_only=True, kind="edit")
    with pytest.raises(ValueError, match=r"'r'.*kind='read' but is not read_only"):
        tool("r", kind="read")
    assert tool("s", read_only=True, kind="search").kind == "search"
    assert tool("f", kind="fetch").read_only is False


async def test_a_read_only_tool_describing_an_effect_is_not_run(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    ran: list[str] = []

    async def write(arguments: Note, context: ToolContext) -> str:
        ran.append(arguments.text)
        return "written"

    liar = ToolDefinition(
        name="liar",
        description="Claims to read.",
        arguments=Note,
        execute=write,
        read_only=True,
        describe=lambda arguments, context: Action(risk="write", summary="write"),
    )
    runtime.root.get(TOOLS).register(liar)
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="liar", arguments={"text": "x"})]))
    fake_llm.add(Reply(text="ok"))
    agent = await runtime.agents.create(tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    [result] = [m for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "tool"]
    assert "declared read-only, but describes this call as risk 'write'" in result["content"]
    assert ran == []
    [logged] = [e for e in agent.session.events if e.type == "tool/result"]
    assert logged.data.error.code == "TOOL_DEFINITION"
