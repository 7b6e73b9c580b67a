"""An editor's first request waits for the MCP servers (issue 22 item 5): it offers
every ready server's tools, whatever the servers' start-up takes."""

from __future__ import annotations

import asyncio
import sys

from acp.schema import McpServerStdio

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import SETTINGS, TIMEOUT, Dsh
from tests.e2e.test_mcp_headless import FIXTURE, server_table


async def test_the_first_request_offers_the_mcp_servers_tools(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS + 'disabled = ["title"]\n' + server_table("fixture", str(FIXTURE), "stdio")
    )
    fake_llm.add(Reply(text="Hello."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("hi")), TIMEOUT)
    [first] = fake_llm.chat_requests
    offered = {t["function"]["name"] for t in first.body["tools"]}
    assert "mcp__fixture__echo" in offered


async def test_the_editors_own_servers_start_for_its_session(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__editor__echo", arguments='{"text": "hi"}')]),
        Reply(text="It said hi."),
    )
    editor = Editor()
    server = McpServerStdio(
        name="editor", command=sys.executable, args=[str(FIXTURE), "stdio"], env=[]
    )
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project), mcp_servers=[server])).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("hi")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        # Another session of the same editor has only what it was offered.
        other = (await conn.new_session(cwd=str(dsh.project))).session_id
        fake_llm.add(Reply(text="Plain."))
        await asyncio.wait_for(conn.prompt(session_id=other, prompt=text("hi")), TIMEOUT)
    first = fake_llm.chat_requests[0].body
    assert "mcp__editor__echo" in {t["function"]["name"] for t in first["tools"]}
    answer = [
        m["content"] for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "tool"
    ]
    assert answer == ["echo: hi"]
    last = fake_llm.chat_requests[-1].body
    assert not any(t["function"]["name"].startswith("mcp__") for t in last["tools"])
