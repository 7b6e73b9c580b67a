"""The sandbox as the interactive front ends show it (issue 37): the TUI's status bar,
``/status``, and the start-up warning said once (the TUI's transcript, plain mode's
stderr), with the real app, a real runtime and the real bwrap probe against the
scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput
from textual.pilot import Pilot

from dsh.runtime import Runtime
from dsh.testing import FakeLLM
from dsh.trust import TrustStore
from dsh.ui import session_controller
from dsh.ui.tui.app import DshApp, TuiRequest
from tests.ui.plain_support import Plain
from tests.ui.tui_support import SIZE, make_runtime, screen_text, tui, type_text, until

CANNOT_START = "sandbox cannot start"
MISSING = "/nonexistent/bwrap"
LIMIT = 30.0
"""Any one wait for an app that starts its own runtime: slow on a loaded box."""


@pytest.fixture(autouse=True)
def nothing_said_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warnings already said are the process's: each test starts as a new dsh."""
    monkeypatch.setattr(session_controller, "_SAID", set())


def bar(app: DshApp) -> str:
    return str(app.status_bar.render())


async def status_says(app: DshApp, pilot: Pilot[int], wanted: str) -> str:
    """What ``/status`` adds to the transcript, once it says ``wanted``."""
    before = len(screen_text(app))
    await type_text(app, pilot, "/status")
    await pilot.press("enter")
    await until(pilot, lambda: wanted in screen_text(app)[before:], what="/status")
    return screen_text(app)[before:]


async def test_the_status_bar_and_status_show_the_sandbox(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        # One word on the bar (a long status line is cut), the policy in /status.
        await until(pilot, lambda: bar(app).endswith("sandboxed"), what="the bar")
        said = await status_says(app, pilot, "sandbox workspace-write")
        assert "bubblewrap" in said
        assert CANNOT_START not in screen_text(app)
        assert "sandbox is off" not in screen_text(app)


@pytest.fixture
async def unsandboxable(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    """A runtime whose user settings name a bwrap that is not there."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "settings.toml").write_text(f'[sandbox]\nprogram = "{MISSING}"\n')
    started = await make_runtime(home, tmp_path, fake_llm)
    yield started
    await started.aclose()


async def test_a_sandbox_that_cannot_start_is_said_once_with_why(
    unsandboxable: Runtime, tmp_path: Path
) -> None:
    async with tui(unsandboxable, tmp_path, tmp_path / "home") as (app, pilot):
        await until(pilot, lambda: CANNOT_START in screen_text(app), what="the warning")
        text = screen_text(app)
        assert f"'{MISSING}' is not an executable file" in text
        assert text.count(CANNOT_START) == 1
        await until(pilot, lambda: "no sandbox" in bar(app), what="the bar")
        said = await status_says(app, pilot, "no sandbox")
        assert MISSING in said
        # A new session is no new start: its transcript does not say it again.
        assert app.agent is not None
        first = app.agent.id
        await type_text(app, pilot, "/new")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: app.agent is not None and app.agent.id != first and "dsh ·" in screen_text(app),
            what="/new",
        )
        await pilot.pause(0.1)
        assert CANNOT_START not in screen_text(app)
        assert "no sandbox" in bar(app)


async def test_plain_mode_says_it_on_stderr_once(
    unsandboxable: Runtime, pipe: PipeInput, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = Plain(unsandboxable, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    plain.type("/status\r")
    await plain.wait_for("no sandbox")
    assert MISSING in plain.text
    plain.type("/new\r")
    await plain.wait_for("Ctrl+D to quit", count=2)
    assert await plain.quit() == 0
    errors = capsys.readouterr().err
    [line] = [line for line in errors.splitlines() if CANNOT_START in line]
    assert line.startswith("dsh: the sandbox cannot start: ")
    assert f"'{MISSING}' is not an executable file" in line
    assert CANNOT_START not in plain.text  # not in the transcript


def project_turning_it_off(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".dsh").mkdir()
    (project / ".dsh" / "settings.toml").write_text('[sandbox]\npolicy = "off"\n')
    return project.resolve()


@pytest.mark.parametrize("trusted", [True, False])
async def test_a_project_cannot_turn_the_sandbox_off(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, trusted: bool
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.delenv("NO_COLOR", raising=False)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("DSH_HOME", str(home))
    project = project_turning_it_off(tmp_path)
    TrustStore(home).decide(project, trusted)  # decided before: no trust dialog
    configs = {"llm-deepseek": {"base_url": fake_llm.base_url}, "title": {"generate": False}}
    app = DshApp(TuiRequest(cwd=project, home=home, plugin_configs=configs))
    async with app.run_test(size=SIZE) as pilot:
        try:
            await until(pilot, app.ready.is_set, LIMIT, "ready")
            await until(pilot, lambda: "sandbox" in bar(app), LIMIT, "the bar")
            assert bar(app).endswith("sandboxed")
            await status_says(app, pilot, "sandbox workspace-write")
            text = screen_text(app)
            assert "sandbox is off" not in text
            assert ("sandbox.policy" in text) is not trusted  # untrusted: said ignored
        finally:
            await app.shutdown()
