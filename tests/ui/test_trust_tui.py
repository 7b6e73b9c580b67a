"""The workspace trust dialog in the real TUI: a cloned project whose
``.dsh/settings.toml`` asks for ``bypass``, the real app starting its own runtime
against the scripted model, and the answer read back from ``$DSH_HOME/trust.toml``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import Button

from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply
from dsh.trust import TrustStore
from dsh.ui.tui.app import DshApp, TuiRequest
from dsh.ui.tui.screens.trust import TrustScreen
from tests.ui.tui_support import SIZE, screen_text, shown, until

LIMIT = 30.0
"""Any one wait: start-up imports the runtime and the plugins, slow on a loaded box."""
NOTICE = "This folder is not trusted"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.delenv("NO_COLOR", raising=False)
    folder = tmp_path / "home"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("DSH_HOME", str(folder))
    return folder


def make_project(tmp_path: Path, settings: str | None, env: str | None = None) -> Path:
    """A cloned repository (its own ``.git``, so it is the trust root); its files
    are 0644, as a clone leaves them."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    if settings is not None:
        (project / ".dsh").mkdir()
        path = project / ".dsh" / "settings.toml"
        path.write_text(settings)
        path.chmod(0o644)
    if env is not None:
        (project / ".env").write_text(env)
        (project / ".env").chmod(0o644)
    return project.resolve()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path, '[permissions]\nmode = "bypass"\n')


@asynccontextmanager
async def started(
    home: Path,
    project: Path,
    fake_llm: FakeLLM,
    *,
    size: tuple[int, int] = SIZE,
    **request: Any,
) -> AsyncIterator[tuple[DshApp, Pilot[int]]]:
    """The real app starting its own runtime in ``project`` (the trust question is
    part of that start)."""
    configs: dict[str, dict[str, Any]] = {
        "llm-deepseek": {"base_url": fake_llm.base_url},
        "title": {"generate": False},
    }
    app = DshApp(TuiRequest(cwd=project, home=home, plugin_configs=configs, **request))
    async with app.run_test(size=size) as pilot:
        try:
            yield app, pilot
        finally:
            await app.shutdown()


async def dialog(app: DshApp, pilot: Pilot[int]) -> TrustScreen:
    """The trust dialog once it is on screen with its answers, one focused (it is the
    app's screen a moment before it has composed and mounted them), and past its first
    moments, when an Enter is still taken for the prompt's."""

    def composed() -> bool:
        screen = app.screen
        return (
            isinstance(screen, TrustScreen)
            and len(screen.query(Button)) == 3
            and screen.focused is not None
        )

    await until(pilot, composed, LIMIT, "the trust dialog")
    screen = app.screen
    assert isinstance(screen, TrustScreen)
    await until(pilot, lambda: screen.guard.open, LIMIT, "the dialog to take Enter")
    return screen


async def ready(app: DshApp) -> None:
    await asyncio.wait_for(app.ready.wait(), LIMIT)


def mode(app: DshApp) -> str:
    assert app.runtime is not None
    found: str = app.runtime.root.get(APPROVALS).mode
    return found


def recorded(home: Path) -> dict[str, bool]:
    """The trust store's decisions, folder -> trusted."""
    return {str(d.root): d.trusted for d in TrustStore(home).decisions()}


async def test_the_dialog_lists_the_key_and_dont_trust_is_recorded(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    async with started(home, project, fake_llm) as (app, pilot):
        screen = await dialog(app, pilot)
        changes = shown(screen.query_one("#changes-body"))
        assert 'permissions.mode = "bypass"' in changes
        assert "would widen the permission mode from default to bypass" in changes
        assert str(project) in shown(screen.query_one("#title"))
        # The answer that records nothing has focus; Tab goes round to the first.
        assert isinstance(screen.focused, Button)
        assert screen.focused.id == "later"
        await pilot.press("tab")
        assert isinstance(screen.focused, Button)
        assert screen.focused.id == "distrust"
        await pilot.press("enter")
        await ready(app)
        assert recorded(home) == {str(project): False}
        assert mode(app) == "default"
        await until(pilot, lambda: NOTICE in screen_text(app), LIMIT, "the notice")
        notice = next(line for line in screen_text(app).splitlines() if NOTICE in line)
        assert "permissions.mode" in notice


async def test_trust_is_recorded_and_the_mode_applies(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    async with started(home, project, fake_llm) as (app, pilot):
        screen = await dialog(app, pilot)
        await pilot.press("tab", "right")
        assert isinstance(screen.focused, Button)
        assert screen.focused.id == "trust"
        await pilot.press("enter")
        await ready(app)
        assert recorded(home) == {str(project): True}
        assert mode(app) == "bypass"
        assert NOTICE not in screen_text(app)


async def test_escape_decides_later_and_the_next_start_asks_again(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    async with started(home, project, fake_llm) as (app, pilot):
        await dialog(app, pilot)
        await pilot.press("escape")
        await ready(app)
        assert recorded(home) == {}
        assert mode(app) == "default"
        await until(pilot, lambda: NOTICE in screen_text(app), LIMIT, "the notice")
    async with started(home, project, fake_llm) as (app, pilot):
        await dialog(app, pilot)
        await pilot.press("escape")
        await ready(app)
        assert recorded(home) == {}


async def test_text_typed_while_the_dialog_is_open_goes_to_the_prompt(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Hello to you."))
    async with started(home, project, fake_llm) as (app, pilot):
        screen = await dialog(app, pilot)
        await pilot.press(*"hel")
        screen.post_message(events.Paste("lo"))  # a bracketed paste, as a terminal sends
        await until(pilot, lambda: app.prompt_area.text == "hello", LIMIT, "the paste")
        await pilot.press("enter")
        await until(pilot, lambda: app.prompt_area.text == "", LIMIT, "the prompt to be sent")
        # Neither the letters nor Enter answered it: nothing decided, nothing sent yet.
        assert app.screen is screen
        assert recorded(home) == {}
        assert fake_llm.chat_requests == []
        await pilot.press("tab", "enter")
        await ready(app)
        await until(pilot, lambda: fake_llm.chat_requests, LIMIT, "the first request")
        messages = fake_llm.chat_requests[0].body["messages"]
        assert [m["content"] for m in messages if m["role"] == "user"][-1] == "hello"
        assert recorded(home) == {str(project): False}
        await until(pilot, lambda: "Hello to you." in screen_text(app), LIMIT, "the answer")


@pytest.mark.parametrize("trusted", [True, False])
async def test_a_folder_already_decided_is_not_asked_again(
    home: Path, project: Path, fake_llm: FakeLLM, trusted: bool
) -> None:
    TrustStore(home).decide(project, trusted)
    async with started(home, project, fake_llm) as (app, pilot):
        # The question would hold the start up: ready means it was not asked.
        await ready(app)
        assert not isinstance(app.screen, TrustScreen)
        assert mode(app) == ("bypass" if trusted else "default")
        await pilot.pause()
        assert (NOTICE in screen_text(app)) is not trusted
    assert recorded(home) == {str(project): trusted}


async def test_the_trust_flag_is_not_asked_and_applies_the_settings(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    async with started(home, project, fake_llm, trust=True) as (app, pilot):
        await ready(app)
        assert not isinstance(app.screen, TrustScreen)
        assert mode(app) == "bypass"
        await pilot.pause()
        assert NOTICE not in screen_text(app)
    assert recorded(home) == {}  # --trust is for this run only


async def test_a_project_without_configuration_is_never_asked(
    home: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Not even for the app's own ``.env`` (most projects have one): dsh does not
    read it there, and says so only if the key it needs is found in it alone."""
    project = make_project(tmp_path, None, env="DATABASE_URL=postgres://x\nSECRET_KEY=s\n")
    async with started(home, project, fake_llm) as (app, pilot):
        await ready(app)
        assert not isinstance(app.screen, TrustScreen)
        assert mode(app) == "default"
        await pilot.pause()
        assert NOTICE not in screen_text(app)
    assert recorded(home) == {}


async def test_a_long_list_scrolls_and_the_answers_stay_on_a_small_screen(
    home: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = (
        '[permissions]\nmode = "bypass"\nallow = ["bash(*)"]\n'
        '[plugins]\nmodules = ["repo_tools.plugin"]\n'
        '[plugins.llm-deepseek]\nbase_url = "https://api.example.com/v1"\n'
        'headers = { "X-Team" = "a" }\n'
    )
    project = make_project(tmp_path, settings)
    async with started(home, project, fake_llm, size=(100, 40)) as (app, pilot):
        screen = await dialog(app, pilot)
        changes = shown(screen.query_one("#changes-body"))
        assert 'plugins.llm-deepseek.headers.X-Team = "a"' in changes
        assert "would add headers to requests" in changes

        def answers_inside(height: int) -> bool:
            box = screen.query_one("#dialog").content_region
            inside = all(box.contains_region(b.region) for b in screen.query(Button))
            return inside and box.bottom <= height

        await until(pilot, lambda: answers_inside(40), LIMIT, "the answers on a tall screen")
        # The classic terminal: the whole list no longer fits, so it gives up rows.
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: answers_inside(24), LIMIT, "the answers on a small screen")
        body = screen.query_one("#changes", VerticalScroll)
        assert body.max_scroll_y > 0  # the rest of the list is a scroll away
        await pilot.press("tab", "right", "enter")
        await ready(app)
        assert recorded(home) == {str(project): True}
        assert mode(app) == "bypass"


async def test_decide_later_has_focus_and_enter_takes_it(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    """A dialog with a focused answer, as people expect (issue 36): Enter, once the
    dialog takes keys, answers with it. Decide later records nothing."""
    async with started(home, project, fake_llm) as (app, pilot):
        screen = await dialog(app, pilot)
        focused = screen.focused
        assert isinstance(focused, Button)
        assert focused.id == "later"
        assert focused.has_focus
        await pilot.press("enter")
        await ready(app)
        assert not isinstance(app.screen, TrustScreen)
        assert recorded(home) == {}
        assert mode(app) == "default"
        assert app.prompt_area.text == ""
        assert fake_llm.chat_requests == []


async def test_the_dialog_says_what_else_of_the_folder_trusting_turns_on(
    home: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    project = make_project(tmp_path, '[permissions]\nmode = "bypass"\n', env="DEEPSEEK_API_KEY=x\n")
    (project / ".dsh" / "commands").mkdir()
    (project / ".dsh" / "commands" / "release.md").write_text("!git push\nRelease it.\n")
    (project / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "run-me"}}}')
    async with started(home, project, fake_llm) as (app, pilot):
        screen = await dialog(app, pilot)
        changes = shown(screen.query_one("#changes-body"))
        assert 'permissions.mode = "bypass"' in changes
        also = changes.split("Trusting it also turns on:", 1)[1]
        assert ".dsh/commands/" in also
        assert "slash commands" in also
        assert ".mcp.json" in also
        assert "MCP servers" in also
        assert ".env" in also
        assert ".claude/agents" not in also  # only what the folder holds
        # Named above the list too, which a short terminal shows only the top of.
        explain = shown(screen.query_one("#explain"))
        assert "trusting it also turns on its .dsh/commands/, .mcp.json, .env" in explain
        await pilot.press("escape")
        await ready(app)
        assert recorded(home) == {}


async def test_an_enter_in_a_run_of_typing_does_not_answer_it(
    home: Path, project: Path, fake_llm: FakeLLM
) -> None:
    """An Enter that ends a run of keys (no pause long enough to have read the dialog)
    was meant for the prompt; a lone one, or one after Tab, answers."""
    async with started(home, project, fake_llm) as (app, pilot):
        screen = await dialog(app, pilot)
        screen.guard.seconds = 30  # every key below comes within a run of typing
        await pilot.press("f12", "enter")  # meant for the prompt: not an answer
        await pilot.pause(0.2)
        assert app.screen is screen
        assert recorded(home) == {}
        screen.guard.seconds = 0
        await pilot.press("tab", "enter")  # Don't trust, chosen
        await ready(app)
        assert recorded(home) == {str(project): False}
