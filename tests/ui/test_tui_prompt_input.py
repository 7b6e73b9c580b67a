"""The TUI's prompt under Pilot: new lines, bursts of keys, pastes, completion and
the prompt history.
"""

from __future__ import annotations

from pathlib import Path

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from dsh.ui.tui.prompt_input import CompletionMenu
from tests.ui.tui_support import (
    finish_a_turn,
    home,
    screen_text,
    tui,
    type_text,
    until,
)


async def test_text_and_enter_in_one_burst_send_the_whole_text(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Keys that arrive in one read (terminal automation, a fast typist) apply in the
    order typed: the Enter after them sends all of them (and Tab queues all)."""
    from textual import events

    fake_llm.add(Reply(text="first"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        for char in "list files":
            app.post_message(events.Key(char, char))
        app.post_message(events.Key("enter", "\r"))
        await until(pilot, lambda: len(fake_llm.chat_requests) == 1, what="the request")
        await until(pilot, lambda: app.agent.status == "idle", what="the turn")
        assert app.prompt_area.text == ""
        users = [m for m in fake_llm.chat_requests[0].body["messages"] if m["role"] == "user"]
        assert users[-1]["content"] == "list files"


async def test_backslash_enter_starts_a_new_line(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from textual import events

    fake_llm.add(Reply(text="ok"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        # Typed in one burst, as a terminal delivers a fast typist's keys.
        for key, char in [*((c, c) for c in "one"), ("backslash", "\\"), ("enter", "\r")]:
            app.post_message(events.Key(key, char))
        for char in "two":
            app.post_message(events.Key(char, char))
        await until(pilot, lambda: app.prompt_area.text == "one\ntwo", what="two lines")
        assert not fake_llm.requests
        await pilot.press("enter")
        await until(pilot, lambda: fake_llm.requests, what="the message sent")
        sent = fake_llm.requests[0].body["messages"][-1]["content"]
        assert "one\ntwo" in str(sent)


async def test_ctrl_r_lists_the_sessions_prompts(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The prompt list Esc Esc opened before Esc Esc became the rewind picker."""
    from dsh.ui.tui.screens.picker import Picker

    fake_llm.add(Reply(text="one done"))
    fake_llm.add(Reply(text="two done"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "first prompt")
        await finish_a_turn(app, pilot, "second prompt")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the prompt list")
        picker = app.screen
        assert isinstance(picker, Picker)
        assert [str(item) for item in picker.items] == ["second prompt", "first prompt"]
        await pilot.press("down", "enter")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert app.prompt_area.text == "first prompt"  # to edit; nothing sent
        assert len(fake_llm.requests) == 2
        # With text typed, Ctrl+R leaves it alone (and says why).
        await pilot.press("ctrl+r")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, Picker)
        assert app.prompt_area.text == "first prompt"


async def test_slash_completion_and_help(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await pilot.press("/", "h", "e")
        menu = app.query_one(CompletionMenu)
        await until(pilot, lambda: menu.display, what="the menu")
        labels = [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]
        assert any(label.startswith("/help") for label in labels)
        await pilot.press("enter")  # takes the completion and runs it: one Enter
        await until(pilot, lambda: "Keys:" in screen_text(app), what="the help")
        assert app.prompt_area.text == ""
        await type_text(app, pilot, "/permissions")
        await pilot.press("enter")
        await until(pilot, lambda: "Permission mode:" in screen_text(app), what="the output")
        text = screen_text(app)
        assert text.index("• /permissions") < text.index("Permission mode:")  # echo, output
        assert "/theme" in screen_text(app)
        await pilot.press("/", "c", "o")
        await until(pilot, lambda: menu.display, what="the menu again")
        await pilot.press("tab")  # Tab only completes
        assert app.prompt_area.text.startswith("/co")
        assert app.prompt_area.text.endswith(" ")
        assert not fake_llm.requests


async def test_at_path_completion_is_fuzzy(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "parser_utils.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("hi\n")
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "look at @prsutl")
        app.prompt_area.move_cursor(app.prompt_area.document.end)
        menu = app.query_one(CompletionMenu)
        await until(pilot, lambda: menu.display, what="the menu")
        await pilot.press("tab")
        assert app.prompt_area.text == "look at @src/parser_utils.py "


async def test_prompt_history_is_kept_per_project(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="one"))
    fake_llm.add(Reply(text="two"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        for text in ("first prompt", "second prompt"):
            await finish_a_turn(app, pilot, text)
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await pilot.press("up")
        assert app.prompt_area.text == "second prompt"
        await pilot.press("up")
        assert app.prompt_area.text == "first prompt"
        await pilot.press("down", "down")
        assert app.prompt_area.text == ""


async def test_a_long_paste_collapses_and_is_sent_whole(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="got it"))
    pasted = "\n".join(f"line {i}" for i in range(50))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        from textual import events

        app.prompt_area.post_message(events.Paste(pasted))
        await pilot.pause()
        assert app.prompt_area.text == "[pasted text #1, 50 lines]"
        await pilot.press("enter")
        await until(pilot, lambda: fake_llm.requests, what="the request")
        users = [m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"]
        assert "line 49" in str(users[-1]["content"])


async def test_pastes_go_in_once_in_order_and_are_counted_right(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from textual import events

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        prompt = app.prompt_area  # a paste reaches the app, which hands it to the prompt
        app.post_message(events.Paste("one line"))
        await pilot.pause()
        assert prompt.text == "one line"
        prompt.set_text("")
        three = "alpha line 1\nbeta line 2\ngamma line 3"
        app.post_message(events.Paste(three))
        await pilot.pause()
        assert prompt.text == three
        prompt.set_text("")
        forty = "".join(f"row {i}\n" for i in range(40))  # a final newline, as copied
        app.post_message(events.Paste(forty))
        await pilot.pause()
        assert prompt.text == "[pasted text #1, 40 lines]"
        assert prompt.expanded_text() == forty


async def test_shift_enter_alt_enter_and_ctrl_j_each_add_a_line(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The keys the README lists as a new line, where the terminal tells them apart
    (a terminal with the kitty keyboard protocol sends Shift+Enter as its own key)."""
    fake_llm.add(Reply(text="ok"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await pilot.press("a", "shift+enter", "b", "alt+enter", "c", "ctrl+j", "d")
        await until(pilot, lambda: app.prompt_area.text == "a\nb\nc\nd", what="four lines")
        assert not fake_llm.requests
        await pilot.press("enter")
        await until(pilot, lambda: fake_llm.requests, what="the message sent")
        sent = fake_llm.requests[0].body["messages"][-1]["content"]
        assert sent == "a\nb\nc\nd"
