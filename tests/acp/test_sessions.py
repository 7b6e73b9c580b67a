"""``dsh acp`` sessions beyond one process: "reject for this session" held after a
load in a new process; closing, resuming, forking."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import RequestError

from dsh.session import check_log
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


async def test_resume_without_replay_then_close(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="First answer."), Reply(text="Second answer."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("first")), TIMEOUT)
    again = Editor()
    async with editor_session(dsh, again) as (conn, _):
        assert again.initialized is not None
        offered = again.initialized.agent_capabilities
        assert offered is not None
        assert offered.session_capabilities is not None
        assert offered.session_capabilities.resume is not None
        assert offered.session_capabilities.close is not None
        assert offered.session_capabilities.fork is not None
        resumed = await asyncio.wait_for(
            conn.resume_session(cwd=str(dsh.project), session_id=sid), TIMEOUT
        )
        assert resumed.modes is not None
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("second")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        # Nothing of the history was sent again: only the new answer.
        assert again.said_by_user() == ""
        assert again.text() == "Second answer."
        await conn.close_session(session_id=sid)
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id=sid, prompt=text("third"))
        assert unknown.value.code == -32602
        with pytest.raises(RequestError) as twice:
            await conn.close_session(session_id=sid)
        assert twice.value.code == -32602
        with pytest.raises(RequestError) as missing:
            await conn.resume_session(cwd=str(dsh.project), session_id="no-such-session")
        assert missing.value.code == -32602
    assert "First answer." in json.dumps(fake_llm.chat_requests[-1].body["messages"])
    assert len(fake_llm.chat_requests) == 2
    events = await dsh.checked_events(sid)
    assert [e.type for e in events].count("turn/end") == 2


async def test_a_fork_goes_on_apart_from_its_source(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Shared answer."), Reply(text="In the fork."), Reply(text="At home."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("shared")), TIMEOUT)
        forked = await asyncio.wait_for(
            conn.fork_session(cwd=str(dsh.project), session_id=sid), TIMEOUT
        )
        fid = forked.session_id
        assert fid != sid
        assert editor.said_by_user() == ""  # not replayed: the editor has the history
        await asyncio.wait_for(conn.prompt(session_id=fid, prompt=text("fork only")), TIMEOUT)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("source only")), TIMEOUT)
    _, in_fork, at_home = (json.dumps(r.body["messages"]) for r in fake_llm.chat_requests)
    assert "Shared answer." in in_fork
    assert "fork only" in in_fork
    assert "Shared answer." in at_home
    assert "fork only" not in at_home
    assert sorted(await dsh.session_ids()) == sorted([sid, fid])
    # (The server's requests interleave two sessions: each log is checked on its own.)
    for session_id in (sid, fid):
        events = await dsh.events(session_id)
        assert check_log(events) == []
        assert [e.type for e in events].count("turn/end") == 2


async def test_closing_a_session_mid_reply_ends_its_prompt(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="word " * 400, chunk_size=5, chunk_delay_ms=20))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("talk")))
        await editor.wait_for(lambda: editor.text())
        await asyncio.wait_for(conn.close_session(session_id=sid), TIMEOUT)
        reply = await asyncio.wait_for(prompt, TIMEOUT)
        assert reply.stop_reason == "cancelled"
    events = await dsh.checked_events(sid)
    [end] = [e for e in events if e.type == "turn/end"]
    assert end.data.reason.kind == "aborted"


async def test_the_editors_list_is_brought_up_to_date_with_storage(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """The index is derived: lost, the editor's list is rebuilt from the logs; an entry
    whose log is gone is not listed (issue 34)."""
    fake_llm.add(Reply(text="kept"), Reply(text="lost"))
    assert (await dsh.run("-p", "kept")).code == 0
    assert (await dsh.run("-p", "lost")).code == 0
    kept, lost = await dsh.session_ids()
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        (dsh.home / name).unlink(missing_ok=True)
    [log] = [p for p in dsh.home.rglob("session.jsonl") if lost in str(p)]
    log.unlink()

    async with editor_session(dsh, Editor()) as (conn, _):
        listed = await asyncio.wait_for(conn.list_sessions(cwd=str(dsh.project)), TIMEOUT)
    assert [(s.session_id, s.title) for s in listed.sessions] == [(kept, "kept")]
