"""The TUI's own start: first run, the demo, commands from every plugin."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh.demo import start_demo
from dsh.runtime import Runtime
from dsh.ui.tui.app import EXIT_FAILED, DshApp, TuiRequest
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.question import QuestionScreen
from dsh.ui.tui.screens.setup import SetupScreen
from tests.ui.tui_support import SIZE, screen_text, tui, until


async def test_first_run_opens_the_setup_screen_instead_of_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("DSH_HOME", str(home))
    app = DshApp(TuiRequest(cwd=tmp_path, home=home))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SetupScreen), what="the setup screen")
        assert app.runtime is None  # nothing loads before a provider is chosen
        await pilot.press("escape")
        await until(pilot, lambda: not app.is_running, what="the app to end")
    assert app.return_code == EXIT_FAILED


async def test_the_demo_plays_in_the_tui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = await start_demo(tmp_path)
    for name, value in demo.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DSH_HOME", str(demo.home))
    request = TuiRequest(
        cwd=demo.project, home=demo.home, plugin_configs=demo.plugin_configs, draft=demo.prompt
    )
    app = DshApp(request)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), 20)
            assert app.prompt_area.text == demo.prompt
            await pilot.press("enter")
            answered: list[object] = []
            for _ in range(2):  # the edit, then the command
                await until(
                    pilot,
                    lambda: isinstance(app.screen, ApprovalScreen) and app.screen not in answered,
                    limit=20,
                    what="an approval",
                )
                answered.append(app.screen)
                await pilot.pause(0.3)
                await pilot.press("y")
            await until(
                pilot, lambda: isinstance(app.screen, QuestionScreen), limit=20, what="the question"
            )
            await pilot.pause(0.3)
            await pilot.press("enter")
            await until(
                pilot,
                lambda: "That was the whole demo" in screen_text(app),
                limit=20,
                what="the last answer",
            )
            assert "Nice to see you" in (demo.project / "greet.py").read_text()
            await app.shutdown()
    finally:
        await demo.close()


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("/cost", "model calls"),
        ("/model", "deepseek"),
        ("/permissions", "default"),
        ("/title A title of my own", "A title of my own"),
        ("/status", "idle"),
        ("/sessions", "session"),
        ("/skills", "skill"),
        ("/compact", "compact"),
        ("/nonsense", "Unknown command /nonsense"),
    ],
)
async def test_commands_answer_in_the_transcript(
    runtime: Runtime, tmp_path: Path, command: str, shown: str
) -> None:
    from dsh.ui.tui.screens.picker import Picker

    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        before = screen_text(app)
        app.run_worker(app.submit(command))  # /model alone then waits on its picker
        await until(
            pilot,
            lambda: shown.lower() in screen_text(app)[len(before) :].lower(),
            what=f"what {command} shows",
        )
        if command == "/model":
            # The picker may open after the line above is shown: close it, or the app
            # quits under a worker still waiting on it.
            await until(pilot, lambda: isinstance(app.screen, Picker), what="the model picker")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, Picker), what="it closed")
