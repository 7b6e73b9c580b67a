"""``dsh acp`` ends its sessions with the person's ``SessionEnd`` hooks, awaited
before it exits: when the editor closes its end, and when it ends dsh with SIGTERM
in the middle of a turn."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, connect_to_agent

from dsh.testing import FakeLLM, Reply
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import SETTINGS, TIMEOUT, Dsh, of_type

HOOK = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "hook.py"


def with_session_end(dsh: Dsh, record: Path) -> None:
    # The hook takes its time before it writes: dsh must wait for it before exiting.
    command = json.dumps(f"sleep 1; {sys.executable} {HOOK} {record} ok")
    (dsh.home / "settings.toml").write_text(
        SETTINGS
        + 'disabled = ["title"]\n'
        + f"[[hooks.SessionEnd]]\nhooks = [{{ command = {command}, timeout = 30 }}]\n"
    )


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_the_editor_closing_ends_the_session_with_the_hook(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "end.jsonl"
    with_session_end(dsh, record)
    fake_llm.add(Reply(text="Hi."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("hi")), TIMEOUT)
        assert records(record) == []  # the session goes on while the editor is there
    [payload] = records(record)  # written by the time dsh acp exited
    assert (payload["hook_event_name"], payload["reason"]) == ("SessionEnd", "other")
    assert payload["session_id"] == sid
    events = await dsh.checked_events(sid)
    [ran] = of_type(events, "hooks/ran")
    assert ran.data.event == "SessionEnd"


async def test_sigterm_mid_turn_ends_the_session_with_the_hook(dsh: Dsh, fake_llm: FakeLLM) -> None:
    record = dsh.root / "end.jsonl"
    with_session_end(dsh, record)
    fake_llm.add(Reply(text="word " * 400, chunk_size=5, chunk_delay_ms=20))
    editor = Editor()
    child = await dsh.start("acp")
    assert child.stdin is not None
    assert child.stdout is not None
    conn = connect_to_agent(editor, child.stdin, child.stdout)
    try:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), TIMEOUT)
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("talk")))
        await editor.wait_for(lambda: editor.text())
        child.terminate()  # as an editor closing may end its agent
        code = await asyncio.wait_for(child.wait(), TIMEOUT)
        await asyncio.gather(prompt, return_exceptions=True)  # the connection closed
    finally:
        await conn.close()
    assert code == 0
    [payload] = records(record)
    assert (payload["session_id"], payload["reason"]) == (sid, "other")
    events = await dsh.checked_events(sid)
    [end] = of_type(events, "turn/end")
    assert end.data.reason.kind == "aborted"
