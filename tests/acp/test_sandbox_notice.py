"""``dsh acp`` says the sandbox's start-up warning once per process, where the editor
shows it: a message before the first prompt's answer (updates sent before
``session/new`` answers may be dropped), and in the log (issue 37)."""

from __future__ import annotations

import asyncio

from dsh.testing import FakeLLM, Reply
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh

OFF = "the sandbox is off"


async def test_sandbox_off_is_said_once_before_the_first_answer(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    dsh.home_of_its_own()
    fake_llm.add(Reply(text="First answer."), Reply(text="Second answer."))
    editor = Editor()
    async with editor_session(dsh, editor, "--sandbox", "off") as (conn, _):
        for said in ("one", "two"):  # two editor sessions: two runtimes, one process
            session = await conn.new_session(cwd=str(dsh.project))
            reply = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=text(said)), TIMEOUT
            )
            assert reply.stop_reason == "end_turn"
    shown = editor.text()
    assert shown.count(OFF) == 1, shown
    assert shown.index(OFF) < shown.index("First answer.")
    logged = "".join(path.read_text() for path in (dsh.home / "logs").glob("acp-*.log"))
    assert logged.count(OFF) == 1, logged
