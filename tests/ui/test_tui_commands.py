"""The TUI's commands and pickers under Pilot: copying, themes, the model, and new,
resumed and continued sessions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from dsh.ui.entries import AnswerEntry
from tests.ui.tui_support import (
    finish_a_turn,
    home,
    screen_text,
    tui,
    type_text,
    until,
)


async def test_copy_and_theme_commands(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no system clipboard tool
    fake_llm.add(Reply(text="Use this:\n\n```sh\nmake test\n```\n"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        copied: list[str] = []
        monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
        await type_text(app, pilot, "how")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: (
                app.agent.status == "idle"
                and any(isinstance(e, AnswerEntry) and e.done for e in app.fold.entries)
            ),
            what="the answer",
        )
        await app.submit("/copy code")
        assert copied == ["make test\n"]
        await app.submit("/copy")
        assert copied[-1].startswith("Use this:")
        await app.submit("/theme dsh-light")
        await pilot.pause()
        assert app.theme == "dsh-light"


async def test_a_mouse_selection_is_copied_on_release_unless_turned_off(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh.ui.tui.transcript_view import UserView

    for copy_on_select in (True, False):
        fake_llm.add(Reply(text="Fine."))
        async with tui(runtime, tmp_path, home(tmp_path), copy_on_select=copy_on_select) as (
            app,
            pilot,
        ):
            copied: list[str] = []
            monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
            await finish_a_turn(app, pilot, "select these words")
            view = app.query_one(UserView)
            # A drag over "select these": press, move, release.
            await pilot.mouse_down(view, offset=(1, 0))
            await pilot.hover(view, offset=(13, 0))
            await pilot.mouse_up(view, offset=(13, 0))
            await until(pilot, lambda: bool(app.screen.get_selected_text()), what="selection")
            await pilot.pause(0.1)
            if copy_on_select:
                assert copied == ["select these"]
                assert app.screen.get_selected_text()  # still shown selected
                # A double click selects (Textual's choice of what) after the release.
                await pilot.double_click(view, offset=(15, 0))
                await until(pilot, lambda: len(copied) == 2, what="the second copy")  # noqa: B023
                assert copied[1] == app.screen.get_selected_text() == "select these words"
            else:
                assert copied == []
                await pilot.press("ctrl+c")  # copies it then
                assert copied == ["select these"]


async def test_the_theme_picker_previews_and_esc_puts_the_theme_back(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.screens.picker import Picker

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        before = app.theme
        names = sorted(app.available_themes)
        await type_text(app, pilot, "/theme")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the theme picker")
        await pilot.press("down")
        moved = names[(names.index(before) + 1) % len(names)]
        await until(pilot, lambda: app.theme == moved, what="the preview")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert app.theme == before
        # Enter keeps the one highlighted.
        await type_text(app, pilot, "/theme")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the theme picker")
        await pilot.press("down", "enter")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert app.theme == moved
        await until(pilot, lambda: f"Theme: {moved}." in screen_text(app))


async def test_the_model_picker_switches_the_model(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.screens.picker import Picker

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        assert app.agent is not None
        assert app.agent.options.model == "deepseek-flash"
        await type_text(app, pilot, "/model")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the model picker")
        picker = app.screen
        assert isinstance(picker, Picker)
        listed = [str(item).split(" · ")[0] for item in picker.items]
        assert "deepseek-v4-pro" in listed
        assert picker.current == listed.index("deepseek-flash")
        steps = listed.index("deepseek-v4-pro") - listed.index("deepseek-flash")
        await pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps), "enter")
        await until(pilot, lambda: app.agent.options.model == "deepseek-v4-pro", what="switch")
        await until(pilot, lambda: "deepseek-v4-pro" in str(app.status_bar.render()))


async def test_new_resume_picker_and_continue(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.screens.sessions import SessionPicker

    fake_llm.add(Reply(text="answer one"))
    fake_llm.add(Reply(text="answer two"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "the first session")
        first = app.agent.id
        await app.submit("/new")
        await until(pilot, lambda: app.agent.id != first, what="a new session")
        assert "answer one" not in screen_text(app)
        await finish_a_turn(app, pilot, "the second session")
        second = app.agent.id
        app.run_worker(app.submit("/resume"))  # the picker, newest first; waits for a pick
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), what="the picker")
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.agent.id == first, what="the first session back")
        assert "answer one" in screen_text(app)
    async with tui(runtime, tmp_path, home(tmp_path), continue_last=True) as (app, pilot):
        assert app.agent.id in (first, second)  # the latest written here
        assert "answer" in screen_text(app)


async def test_resume_without_an_id_opens_the_picker_first(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.app import DshApp, TuiRequest
    from dsh.ui.tui.screens.sessions import SessionPicker

    fake_llm.add(Reply(text="remember me"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "a session to find")
        wanted = app.agent.id
    app = DshApp(TuiRequest(cwd=tmp_path, home=home(tmp_path), pick=True), runtime=runtime)
    async with app.run_test(size=(100, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), what="the picker")
        await pilot.press("enter")
        await until(pilot, lambda: app.ready.is_set(), what="ready")
        assert app.agent.id == wanted
        assert "remember me" in screen_text(app)
        await app.shutdown()
    # Esc in the picker goes back to the shell: no session is started instead.
    sessions_before = await runtime.sessions.persistence.list()
    app = DshApp(TuiRequest(cwd=tmp_path, home=home(tmp_path), pick=True), runtime=runtime)
    async with app.run_test(size=(100, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), what="the picker")
        await pilot.press("escape")
        await until(pilot, lambda: not app.is_running, what="the exit")
    assert app.agent is None
    assert len(await runtime.sessions.persistence.list()) == len(sessions_before)
