"""An editor's first request waits for the MCP servers (issue 22 item 5): it offers
every ready server's tools, whatever the servers' start-up takes."""

from __future__ import annotations

import asyncio

from dsh.testing import FakeLLM, Reply
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
