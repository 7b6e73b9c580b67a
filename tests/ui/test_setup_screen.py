"""The first-run screen, in a host app: test a connection, save, and what lands where."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Button, Input, Static

from dsh.credentials import CredentialStore
from dsh.setup import SetupChoice
from dsh.testing import FakeLLM, Reply
from dsh.ui.tui.screens.setup import SetupScreen


class Host(App[None]):
    def __init__(self, screen: SetupScreen) -> None:
        super().__init__()
        self.setup_screen = screen
        self.result: list[SetupChoice | None] = []

    def on_mount(self) -> None:
        self.push_screen(self.setup_screen, callback=self.result.append)


async def test_test_then_save_an_openai_compatible_endpoint(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    screen = SetupScreen(home, CredentialStore(home, tmp_path, environ={}))
    app = Host(screen)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.click("#openai-compat")
        await pilot.pause()
        assert screen.query_one("#base-url", Input).display  # the fields that form asks
        screen.query_one("#base-url", Input).value = fake_llm.base_url + "/v1"
        screen.query_one("#name", Input).value = "local"
        screen.query_one("#model", Input).value = "qwen"
        screen.query_one("#key", Input).value = "sk-local-canary"
        fake_llm.add(Reply(text="OK"))
        screen.query_one("#test", Button).press()  # may be scrolled out of view
        for _ in range(100):
            await pilot.pause(0.05)
            if "answered" in str(screen.query_one("#result", Static).render()):
                break
        assert "local/qwen answered." in str(screen.query_one("#result", Static).render())
        screen.query_one("#save", Button).press()
        await pilot.pause()
    [choice] = app.result
    assert choice is not None
    assert (choice.kind, choice.name) == ("openai-compat", "local")
    saved = tomllib.loads((home / "settings.toml").read_text())
    assert saved["agent"] == {"provider": "local", "model": "qwen"}
    assert "sk-local-canary" not in (home / "settings.toml").read_text()
    assert "sk-local-canary" in (home / "credentials.json").read_text()


async def test_a_deepseek_setup_without_a_key_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    screen = SetupScreen(home, CredentialStore(home, tmp_path, environ={}))
    app = Host(screen)
    async with app.run_test(size=(100, 40)) as pilot:
        screen.query_one("#save", Button).press()
        await pilot.pause()
        assert "needs a key" in str(screen.query_one("#result", Static).render())
        await pilot.press("escape")
        await pilot.pause()
    assert app.result == [None]
    assert not (home / "settings.toml").exists()


async def test_the_screen_starts_on_the_first_choice_and_fits_forty_rows(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    screen = SetupScreen(home, CredentialStore(home, tmp_path, environ={}))
    app = Host(screen)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        assert screen.focused is screen.query_one("#kind")
        buttons = screen.query_one("#save", Button)
        assert buttons.region.bottom <= 40  # on screen, not below the fold
        key_env = screen.query_one("#key-env", Input)
        assert key_env.placeholder == "DEEPSEEK_API_KEY"
        await pilot.click("#openai-compat")
        await pilot.pause()
        assert key_env.placeholder == "OPENAI_COMPAT_API_KEY"  # what it is saved as


async def test_test_connection_goes_where_deepseek_base_url_says(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh.credentials import Secret
    from dsh.setup import check_connection

    monkeypatch.setenv("DEEPSEEK_BASE_URL", fake_llm.base_url)
    fake_llm.add(Reply(text="OK"))
    choice = SetupChoice(kind="deepseek", model="deepseek-v4-flash", key=Secret("sk-test"))
    assert await check_connection(choice) is None
    assert len(fake_llm.chat_requests) == 1


async def test_at_80x24_the_screen_opens_on_its_welcome(tmp_path: Path) -> None:
    """Too tall for 24 rows, it scrolls; but it opens at the top, where the welcome
    says what the screen is for, with the first choice focused (issue 36)."""
    from textual.containers import VerticalScroll

    home = tmp_path / "home"
    screen = SetupScreen(home, CredentialStore(home, tmp_path, environ={}))
    app = Host(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        scroll = screen.query_one(VerticalScroll)
        assert scroll.max_scroll_y > 0  # the case: it does not fit
        assert screen.focused is screen.query_one("#kind")
        assert scroll.scroll_y == 0
        intro = screen.query_one("#intro", Static)
        assert intro.region.y >= scroll.region.y
        assert intro.region.height > 0
        assert "Welcome to dsh" in str(intro.render())


async def test_enter_in_the_key_field_saves_and_starts(tmp_path: Path) -> None:
    """Enter in a field goes on as a person expects: to the next field, and from the
    key (the last thing to give) it saves and starts, as the button does."""
    home = tmp_path / "home"
    screen = SetupScreen(home, CredentialStore(home, tmp_path, environ={}))
    app = Host(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen.query_one("#model", Input).focus()
        await pilot.press("enter")  # the model as suggested: on to the key
        await pilot.pause()
        assert screen.focused is screen.query_one("#key", Input)
        await pilot.press(*"sk-entered-canary", "enter")
        await pilot.pause()
    [choice] = app.result
    assert choice is not None
    assert choice.key is not None
    assert choice.key.reveal() == "sk-entered-canary"
    saved = tomllib.loads((home / "settings.toml").read_text())
    assert saved["agent"]["model"] == "deepseek-flash"
    assert "sk-entered-canary" in (home / "credentials.json").read_text()


async def test_enter_in_the_key_field_without_a_key_says_why_and_stays(tmp_path: Path) -> None:
    home = tmp_path / "home"
    screen = SetupScreen(home, CredentialStore(home, tmp_path, environ={}))
    app = Host(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen.query_one("#key", Input).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "needs a key" in str(screen.query_one("#result", Static).render())
        assert app.result == []
        assert not (home / "settings.toml").exists()
