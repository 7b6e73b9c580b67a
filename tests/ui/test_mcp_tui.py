"""The TUI with MCP servers: one that never answers does not hold up the prompt or
the first turn (/mcp shows it starting); a running tool's progress shows on its card
and Esc cancels the call at the server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from plugins.mcp import MCP
from tests.support.waits import HANG_S
from tests.ui.tui_support import finish_a_turn, make_runtime, screen_text, tui, type_text, until

MUTE = f"""
[mcp.servers.mute]
command = {json.dumps(sys.executable)}
args = ["-c", "import time; time.sleep(3600)"]
startup_timeout = 3600
"""


@pytest_asyncio.fixture
async def mute_runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.toml").write_text(MUTE)
    started = await make_runtime(tmp_path / "home", tmp_path, fake_llm)
    yield started
    await started.aclose()


async def test_the_tui_does_not_wait_for_a_server(
    mute_runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Answered without it."))
    async with tui(mute_runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await finish_a_turn(app, pilot, "hi")
        assert "Answered without it." in screen_text(app)
        [status] = mute_runtime.root.get(MCP).statuses()
        assert status.state == "starting"
        offered = [t["function"]["name"] for t in fake_llm.chat_requests[0].body["tools"]]
        assert not any(name.startswith("mcp__") for name in offered)
        await type_text(app, pilot, "/mcp")
        await pilot.press("enter")
        await until(pilot, lambda: "mute: starting" in screen_text(app), what="/mcp's lines")


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"


async def test_a_server_s_progress_shows_on_the_card_and_esc_cancels_the_call(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture's slow tool says "waiting" and then waits: its card says so while
    it runs; Esc ends the turn and the server hears of the cancel."""
    record = tmp_path / "record.txt"
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(home))
    args = ", ".join(json.dumps(a) for a in (str(FIXTURE), "stdio", "--record", str(record)))
    (home / "settings.toml").write_text(
        f"[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\nargs = [{args}]\n"
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__fixture__slow", arguments={"steps": 0})])
    )
    runtime = await make_runtime(home, tmp_path, fake_llm)
    try:
        await asyncio.wait_for(runtime.root.get(MCP).settled(), HANG_S)
        async with tui(runtime, tmp_path, home) as (app, pilot):
            await type_text(app, pilot, "wait for it")
            await pilot.press("enter")
            await until(pilot, lambda: "waiting (0)" in screen_text(app), what="the progress")
            await pilot.press("escape")
            await until(pilot, lambda: "cancelled" in screen_text(app), what="the turn to end")
            assert "waiting (0)" not in screen_text(app)  # the card shows the outcome now
            await until(
                pilot, lambda: "slow cancelled" in record.read_text(), what="the server to hear"
            )
    finally:
        await runtime.aclose()
