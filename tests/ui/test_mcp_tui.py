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
from dsh.ui.tui.prompt_input import CompletionMenu
from dsh_plugins.mcp import MCP
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
        # Its connection is made once the SDK is imported (in a thread, which a busy
        # machine may finish after the turn): the server is still starting then.
        await asyncio.wait_for(mute_runtime.root.get(MCP).started(), HANG_S)
        [status] = mute_runtime.root.get(MCP).statuses()
        assert status.state == "starting"
        offered = [t["function"]["name"] for t in fake_llm.chat_requests[0].body["tools"]]
        assert not any(name.startswith("mcp__") for name in offered)
        await type_text(app, pilot, "/mcp")
        await pilot.press("enter")
        await until(pilot, lambda: "mute: starting" in screen_text(app), what="/mcp's lines")


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"


@pytest_asyncio.fixture
async def fixture_runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    """The SDK-built fixture server over stdio, ready; it records what it hears in
    record.txt."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(home))
    record = tmp_path / "record.txt"
    args = ", ".join(json.dumps(a) for a in (str(FIXTURE), "stdio", "--record", str(record)))
    (home / "settings.toml").write_text(
        f"[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\nargs = [{args}]\n"
    )
    runtime = await make_runtime(home, tmp_path, fake_llm)
    try:
        await asyncio.wait_for(runtime.root.get(MCP).settled(), HANG_S)
        yield runtime
    finally:
        await runtime.aclose()


async def test_a_server_s_progress_shows_on_the_card_and_esc_cancels_the_call(
    fixture_runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The fixture's slow tool says "waiting" and then waits: its card says so while
    it runs; Esc ends the turn and the server hears of the cancel."""
    record = tmp_path / "record.txt"
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__fixture__slow", arguments={"steps": 0})])
    )
    async with tui(fixture_runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "wait for it")
        await pilot.press("enter")
        await until(pilot, lambda: "waiting (0)" in screen_text(app), what="the progress")
        await pilot.press("escape")
        await until(pilot, lambda: "cancelled" in screen_text(app), what="the turn to end")
        assert "waiting (0)" not in screen_text(app)  # the card shows the outcome now
        await until(
            pilot,
            lambda: record.is_file() and "slow cancelled" in record.read_text(),
            what="the server to hear",
        )


async def test_at_completes_a_server_then_its_resource_which_goes_with_the_prompt(
    fixture_runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    connection = fixture_runtime.root.get(MCP).connections["fixture"]
    (tmp_path / "fixtures.txt").write_text("a file whose name matches too\n")
    fake_llm.add(Reply(text="Milk it is."))
    async with tui(fixture_runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await until(pilot, lambda: connection.resources, what="the resources to be listed")
        menu = app.query_one(CompletionMenu)

        def labels() -> list[str]:
            return [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]

        await type_text(app, pilot, "what is in @fix")
        await until(pilot, lambda: any("fixture:" in x for x in labels()), what="the server")
        assert labels()[0].startswith("fixture:  1 resource (MCP)")
        assert any("fixtures.txt" in label for label in labels())  # the files are there too
        await pilot.press("tab")
        assert app.prompt_area.text == "what is in @fixture:"  # no space: it goes on
        await until(
            pilot, lambda: any("notes://today" in x for x in labels()), what="its resources"
        )
        await pilot.press("tab")
        assert app.prompt_area.text == "what is in @fixture:notes://today "
        await pilot.press(*"please")
        await pilot.press("enter")
        await until(pilot, lambda: "Milk it is." in screen_text(app), what="the answer")
    [request] = fake_llm.chat_requests
    sent = str(request.body["messages"])
    assert "buy milk" in sent  # the resource, read from the server, went with it
