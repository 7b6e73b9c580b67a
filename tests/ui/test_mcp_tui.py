"""The TUI with an MCP server that never answers: the prompt and the first turn do
not wait for it, and /mcp shows it starting."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from plugins.mcp import MCP
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
