"""``dsh acp`` sessions beyond one process: "reject for this session" held after a
load in a new process; closing, resuming, forking."""

from __future__ import annotations

import asyncio
import json

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh


def edit(path: str, old: str, new: str) -> Reply:
    return Reply(
        tool_calls=[
            ToolCallSpec(
                name="edit",
                arguments=json.dumps({"file_path": path, "old_string": old, "new_string": new}),
            )
        ]
    )


def read(path: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="read", arguments=json.dumps({"file_path": path}))])


async def test_a_rejection_for_the_session_holds_in_a_new_process(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    target = dsh.project / "app.py"
    target.write_text("a = 1\n")
    fake_llm.add(
        read("app.py"),
        edit("app.py", "a = 1", "a = 2"),
        Reply(text="Not edited."),
        read("app.py"),  # a new process has read nothing yet
        edit("app.py", "a = 1", "a = 2"),
        Reply(text="Still not."),
    )
    editor = Editor(answers=["reject-always"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("edit")), TIMEOUT)
        assert len(editor.asked) == 1
    # The editor would allow it now: it is never asked.
    again = Editor(answers=["allow-once"])
    async with editor_session(dsh, again) as (conn, _):
        await asyncio.wait_for(conn.load_session(cwd=str(dsh.project), session_id=sid), TIMEOUT)
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("again")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert again.asked == []
        [call] = [c for c in again.tool_calls() if c.kind == "edit"][-1:]
        assert again.tool_updates(call.tool_call_id)[-1].status == "failed"
    assert target.read_text() == "a = 1\n"
    denied = [
        m["content"] for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert "for the rest of the session" in denied[-1]
    events = await dsh.checked_events(sid)
    resolved = [(e.data.outcome, e.data.by) for e in events if e.type == "approval/resolved"]
    assert resolved == [("deny", "user"), ("deny", "user")]
