"""``/rewind`` as an editor's session command (``dsh acp``): offered, refused without
a turn (nobody is asked in the protocol), and with one it takes the code and the
conversation back."""

from __future__ import annotations

import asyncio

from acp.schema import AvailableCommandsUpdate

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh, user_texts


def write(path: str, content: str) -> Reply:
    return Reply(
        tool_calls=[ToolCallSpec(name="write", arguments={"file_path": path, "content": content})]
    )


async def test_rewind_is_a_session_command(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(write("one.txt", "one\n"), Reply(text="Wrote one."))
    fake_llm.add(write("two.txt", "two\n"), Reply(text="Wrote two."))
    editor = Editor()
    async with editor_session(dsh, editor, "--permission-mode", "bypass") as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        for prompt in ("first prompt", "second prompt"):
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text(prompt)), TIMEOUT)
        assert (dsh.project / "two.txt").exists()
        offered = {
            c.name: c
            for u in editor.updates
            if isinstance(u, AvailableCommandsUpdate)
            for c in u.available_commands
        }
        assert "rewind" in offered
        assert offered["rewind"].input is not None
        assert "--code" in offered["rewind"].input.root.hint

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/rewind")), TIMEOUT)
        assert "name the turn to rewind to: /rewind N (turns 1-2)" in editor.text()
        assert (dsh.project / "one.txt").exists()

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/rewind 1")), TIMEOUT)
        assert "Rewound the code and conversation to before turn 1." in editor.text()
        assert not (dsh.project / "one.txt").exists()
        assert not (dsh.project / "two.txt").exists()
        assert len(fake_llm.chat_requests) == 4  # the commands asked the model nothing

        fake_llm.add(Reply(text="From the start."))
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("first prompt")), TIMEOUT)
        texts = user_texts(fake_llm.chat_requests[-1].body)
        assert texts[-1] == "first prompt"
        assert not any("second prompt" in t for t in texts)
        assert sum("first prompt" in t for t in texts) == 1


async def test_undo_is_a_session_command_the_prompt_confirms(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """Nobody can be asked in the protocol: ``/undo`` typed is the confirmation."""
    fake_llm.add(write("one.txt", "one\n"), Reply(text="Wrote one."))
    editor = Editor()
    async with editor_session(dsh, editor, "--permission-mode", "bypass") as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("write one")), TIMEOUT)
        assert (dsh.project / "one.txt").exists()
        offered = {
            c.name
            for u in editor.updates
            if isinstance(u, AvailableCommandsUpdate)
            for c in u.available_commands
        }
        assert "undo" in offered
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/undo")), TIMEOUT)
        assert "remove" in editor.text()
        assert not (dsh.project / "one.txt").exists()
        assert not editor.asked
