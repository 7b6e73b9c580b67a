"""A session another dsh writes, opened in the TUI and in plain mode: the person is
told who has it and chooses to fork it, wait for it, only read it, or start anew."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput

from dsh.runtime import Runtime
from dsh.session import SessionLocks
from dsh.testing import FakeLLM, Reply
from dsh.ui.tui.app import DshApp, TuiRequest
from dsh.ui.tui.screens.busy import BusyScreen
from tests.session.turns import complete_turn
from tests.ui.plain_support import Plain
from tests.ui.tui_support import SIZE, screen_text, until


async def held_elsewhere(runtime: Runtime, home: Path) -> tuple[str, SessionLocks]:
    """A stored session with one turn, its lock held as by another process."""
    store = runtime.sessions
    session = await store.create("/w")
    complete_turn(session, "the first question", "the first answer", with_tool=False)
    await store.close(session)
    other = SessionLocks(home / "locks")  # a second lock on the file: as another process
    other.acquire(session.id)
    return session.id, other


@pytest.mark.parametrize("choice", ["fork", "read"])
async def test_the_tui_offers_the_ways_out(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, choice: str
) -> None:
    home = tmp_path / "home"
    session_id, other = await held_elsewhere(runtime, home)
    fake_llm.add(Reply(text="an answer in the fork"))
    app = DshApp(TuiRequest(cwd=tmp_path, home=home, resume=session_id), runtime=runtime)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, BusyScreen), what="the dialog")
            dialog = app.screen
            assert f"pid {os.getpid()}" in dialog.message
            await pilot.pause(0.2)  # past the dialog's guard
            if choice == "read":
                await pilot.press("down", "down")
            await pilot.press("enter")
            await asyncio.wait_for(app.ready.wait(), 15)
            await pilot.pause()
            assert "the first answer" in screen_text(app)
            if choice == "fork":
                assert app.agent is not None
                assert app.agent.id != session_id
                assert app.agent.session.header.parent_session == session_id
            else:
                assert app.agent is None
                app.prompt_area.set_text("hello")
                await pilot.press("enter")
                await until(pilot, lambda: "Nothing is sent" in screen_text(app))
                assert fake_llm.chat_requests == []
            await app.shutdown()
    finally:
        other.release_all()
    # The session another process writes was not written here.
    loaded = await runtime.sessions.persistence.inspect(session_id)  # type: ignore[arg-type]
    assert [e.type for e in loaded.events].count("turn/end") == 1


async def test_plain_mode_offers_the_ways_out(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, pipe: PipeInput
) -> None:
    home = tmp_path / "home"
    session_id, other = await held_elsewhere(runtime, home)
    fake_llm.add(Reply(text="an answer in the fork"))
    plain = Plain(runtime, pipe, tmp_path, resume=session_id)
    try:
        await plain.wait_for("What now?")
        plain.type("1\r")
        await plain.wait_for("resumed session")  # the fork is open
        plain.type("go on\r")
        await plain.wait_for("an answer in the fork")
        assert await plain.quit() == 0
    finally:
        other.release_all()
    output = plain.text
    assert f"pid {os.getpid()}" in output
    assert "Continue it in a new session" in output
    assert "an answer in the fork" in output
