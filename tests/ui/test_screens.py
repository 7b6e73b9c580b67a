"""The TUI's dialogs in a tiny host app: approval, questions, the session picker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Button, Input, OptionList, Static

from dsh.session.catalog import CatalogEntry
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.questions import Answer, Question, QuestionOption
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.guard import TypedEarly, note_key
from dsh.ui.tui.screens.question import QuestionScreen
from dsh.ui.tui.screens.sessions import (
    SessionPicker,
    catalog_search,
    format_age,
    here_first,
    local_matches,
)
from tests.support.waits import HANG_S
from tests.ui.tui_support import catalog_entry as picker_entry

COMMAND = "rm -rf build && make -j4 all | tee log.txt"
DIFF = """--- a/app.py
+++ b/app.py
@@ -1,3 +1,3 @@
 import os
-print("old")
+print("new")
"""


class Host(App[None]):
    """Pushes one dialog at a time and keeps what each returned. With a ``home`` it
    loads dsh's themes the way the real app does."""

    def __init__(self, home: Path | None = None) -> None:
        self.themed = home is not None  # App.__init__ asks for the variable defaults
        super().__init__()
        self.results: list[Any] = []
        self.typed: list[str] = []
        if home is not None:
            from dsh.ui.tui.theming import register_themes

            assert register_themes(self, home) == []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        from dsh.ui.tui.theming import variable_defaults

        defaults = super().get_theme_variable_defaults()
        return {**defaults, **variable_defaults(self)} if self.themed else defaults

    def compose(self) -> ComposeResult:
        yield Input(id="prompt")

    def on_typed_early(self, message: TypedEarly) -> None:
        self.typed.append(message.text)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            note_key(self, event)  # as DshApp does: the dialogs tell typing from pauses
        await super().on_event(event)

    def open(self, screen: Screen[Any]) -> None:
        self.push_screen(screen, callback=self.results.append)


async def until(pilot: Pilot[Any], condition: Callable[[], object], limit: float = HANG_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


async def opened(pilot: Pilot[Any], app: Host, screen: Screen[Any]) -> None:
    """Push ``screen`` and wait until it is on top with its widgets mounted (a pushed
    screen is ``app.screen`` at once, before it has composed)."""
    app.open(screen)
    await until(pilot, lambda: app.screen is screen and screen.is_mounted)
    await pilot.pause()


def request(
    details: str | None = COMMAND, *, risk: str = "exec", grant: str | None = "bash(make:*)"
):
    return ApprovalRequest(
        id="r1",
        session_id="s1",
        call_id="c1",
        tool_name="bash" if risk == "exec" else "edit",
        summary="run make" if risk == "exec" else "edit app.py",
        details=details,
        risk=risk,  # type: ignore[arg-type]
        reason="bash commands need approval",
        grant=grant,
    )


def shown(widget: Any) -> str:
    return str(widget.render())


# ---------------------------------------------------------------------- approval


async def answer_approval(
    pilot: Pilot[Any], app: Host, *keys: str, req: ApprovalRequest | None = None
) -> ApprovalDecision:
    before = len(app.results)
    await opened(pilot, app, ApprovalScreen(req or request(), guard_seconds=0))
    await pilot.press(*keys)
    await until(pilot, lambda: len(app.results) > before)
    assert not isinstance(app.screen, ApprovalScreen)
    return app.results[-1]  # type: ignore[no-any-return]


async def test_approval_keys_give_each_decision() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        assert (await answer_approval(pilot, app, "y")).outcome == "allow_once"
        session = await answer_approval(pilot, app, "a")
        assert (session.outcome, session.rule) == ("allow_session", None)
        assert (await answer_approval(pilot, app, "n")).outcome == "deny"
        assert (await answer_approval(pilot, app, "escape")).outcome == "deny"
        assert app.results == [
            ApprovalDecision(outcome="allow_once"),
            ApprovalDecision(outcome="allow_session"),
            ApprovalDecision(outcome="deny"),
            ApprovalDecision(outcome="deny"),
        ]


async def test_approval_feedback_is_typed_on_the_same_screen() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(), guard_seconds=0)
        await opened(pilot, app, screen)
        assert not screen.in_feedback
        await pilot.press("f")
        field = screen.query_one("#feedback-input", Input)
        assert screen.in_feedback
        assert field.has_focus
        await pilot.press("y", "a", "n", "f")  # text here, not answers
        assert app.results == []
        assert field.value == "yanf"
        await pilot.press("escape")  # back to the choices, nothing decided
        assert app.screen is screen
        assert not screen.in_feedback
        assert not field.value
        await pilot.press("f")
        field.value = "use the build script instead"
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [
            ApprovalDecision(outcome="deny", feedback="use the build script instead")
        ]


async def test_approval_feedback_left_empty_is_a_plain_denial() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await opened(pilot, app, ApprovalScreen(request(), guard_seconds=0))
        await pilot.press("f", "space", "enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [ApprovalDecision(outcome="deny", feedback=None)]


async def test_approval_buttons_and_no_session_grant() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(grant=None), guard_seconds=0)
        await opened(pilot, app, screen)
        assert not screen.query("#allow-session")
        await pilot.press("a")  # not offered: ignored
        await pilot.pause()
        assert app.results == []
        assert app.screen is screen
        assert await pilot.click("#deny")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [ApprovalDecision(outcome="deny")]

        screen = ApprovalScreen(request(), guard_seconds=0)
        await opened(pilot, app, screen)
        assert "[a]" in str(screen.query_one("#allow-session", Button).label)
        assert "bash(make:*)" in str(screen.query_one("#grant", Static).render())
        assert await pilot.click("#allow-session")
        await until(pilot, lambda: len(app.results) == 2)
        assert app.results[-1] == ApprovalDecision(outcome="allow_session")


async def test_approval_names_the_subagent_that_asks_its_bytes_as_pictures() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(), guard_seconds=0)
        await opened(pilot, app, screen)
        assert not screen.query("#agent")  # the session's own agent: no label
        await pilot.press("n")
        await until(pilot, lambda: len(app.results) == 1)

        label = "explore\x1b]2;pwned\x07 \x1b[31mred"
        asking = request().model_copy(update={"agent_label": label})
        screen = ApprovalScreen(asking, guard_seconds=0)
        await opened(pilot, app, screen)
        said = shown(screen.query_one("#agent", Static))
        assert said == "subagent: explore␛]2;pwned␇ ␛[31mred"
        assert "run make" in shown(screen.query_one("#title", Static))
        await pilot.press("y")
        await until(pilot, lambda: len(app.results) == 2)
        assert app.results[-1] == ApprovalDecision(outcome="allow_once")


async def test_approval_without_details_answers_from_the_buttons_keys() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(None, risk="read", grant=None), guard_seconds=0)
        await opened(pilot, app, screen)
        assert not screen.query("#details")
        await pilot.press("tab")  # the first button
        assert screen.focused is screen.query_one("#allow-once", Button)
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [ApprovalDecision(outcome="allow_once")]


async def test_keys_typed_as_the_approval_opens_are_ignored() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        # A guard no loaded machine outlasts while the keys are handled; then it is
        # opened by hand rather than waited out.
        screen = ApprovalScreen(request(), guard_seconds=30)
        await pilot.press("x")  # the person is typing for the prompt...
        app.open(screen)
        await pilot.press("y", "enter", "a", "escape", "f")  # ...and goes on
        assert app.results == []
        assert app.screen is screen
        assert not screen.in_feedback
        await until(pilot, lambda: len(app.typed) == 3)
        assert "".join(app.typed) == "yaf"  # handed back for the prompt, not lost
        screen.guard.seconds = 0
        await pilot.press("y")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [ApprovalDecision(outcome="allow_once")]


async def test_a_key_that_answers_nothing_goes_on_into_the_prompt() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(), guard_seconds=0)  # every pause long enough
        await opened(pilot, app, screen)
        await pilot.press("o", "k")  # typing, not an answer: the prompt's
        await until(pilot, lambda: len(app.typed) == 2)
        assert "".join(app.typed) == "ok"
        assert app.screen is screen
        await pilot.press("y")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [ApprovalDecision(outcome="allow_once")]


async def test_a_key_in_a_run_is_typing_however_far_the_app_has_read_ahead() -> None:
    """The app notes keys as it reads them and can be many keys ahead of the dialog
    handling one (seen in a real terminal: " and" typed as the dialog opened, its
    ``a`` approved the call because the space before it was no longer remembered)."""
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(), guard_seconds=0.5)
        await opened(pilot, app, screen)
        start = time.monotonic() + 1  # read after the dialog was there
        burst = [events.Key("space", " ")] + [events.Key(c, c) for c in "and then fan"]
        for index, key in enumerate(burst):
            key.time = start + index * 0.001  # one run of typing
            note_key(app, key)  # the app has read the whole burst...
        screen.guard.catch(screen, burst[1])  # ...before the dialog handles its "a"
        await until(pilot, lambda: len(app.typed) == 1)
        assert app.typed == ["a"]  # typing, handed back for the prompt
        assert app.results == []
        assert app.screen is screen


async def test_approval_clicks_are_ignored_while_guarded() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(), guard_seconds=30)
        await pilot.press("x")  # typing, for the prompt: the mouse does not answer yet
        await opened(pilot, app, screen)
        assert await pilot.click("#allow-once")
        await pilot.pause()
        assert app.results == []
        assert app.screen is screen
        screen.guard.seconds = 0
        button = screen.query_one("#allow-once", Button)
        await until(pilot, lambda: not button.has_class("-active"))  # its press effect
        assert await pilot.click(button)
        await until(pilot, lambda: bool(app.results))
        assert app.results == [ApprovalDecision(outcome="allow_once")]


async def test_approval_shows_the_command_and_the_coloured_diff(tmp_path: Path) -> None:
    app = Host(tmp_path)  # dsh's themes: $diff-added and $diff-removed exist
    async with app.run_test(size=(100, 30)) as pilot:
        app.theme = "dsh-light"
        screen = ApprovalScreen(request(), guard_seconds=0)
        await opened(pilot, app, screen)
        body = screen.query_one("#details-body", Static).content
        assert isinstance(body, Syntax)
        assert body.code == COMMAND
        title = shown(screen.query_one("#title", Static))
        assert "bash runs a command: run make" in title
        assert "bash commands need approval" in shown(screen.query_one("#reason"))
        await pilot.press("n")
        await until(pilot, lambda: bool(app.results))

        long_diff = DIFF + "".join(f"+line {i}\n" for i in range(200))
        screen = ApprovalScreen(request(long_diff, risk="write"), guard_seconds=0)
        await opened(pilot, app, screen)
        body = screen.query_one("#details-body", Static).content
        assert isinstance(body, Text)
        assert '+print("new")' in body.plain
        assert '-print("old")' in body.plain
        styles = {body.plain[span.start : span.end]: str(span.style) for span in body.spans}
        assert styles['+print("new")'].lower() == "#1a7f37"  # dsh-light's diff-added
        assert styles['-print("old")'].lower() == "#cf222e"
        details = screen.query_one("#details")
        assert details.max_scroll_y > 0  # long: it scrolls inside the dialog

        app.theme = "dsh-dark"  # the diff follows the theme
        await pilot.pause()
        body = screen.query_one("#details-body", Static).content
        assert isinstance(body, Text)
        styles = {body.plain[span.start : span.end]: str(span.style) for span in body.spans}
        assert styles['+print("new")'].lower() == "#98c379"


async def test_approval_diff_without_dsh_themes_uses_the_palette() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ApprovalScreen(request(DIFF, risk="write"), guard_seconds=0)
        await opened(pilot, app, screen)
        body = screen.query_one("#details-body", Static).content
        assert isinstance(body, Text)
        styles = {body.plain[span.start : span.end]: str(span.style) for span in body.spans}
        assert styles['+print("new")'].lower() == app.theme_variables["success"].lower()[:7]
        assert styles['-print("old")'].lower() == app.theme_variables["error"].lower()[:7]


# ---------------------------------------------------------------------- questions

LANGUAGE = Question(
    id="lang",
    question="Which language?",
    header="Language",
    options=(
        QuestionOption(label="Python", description="the default"),
        QuestionOption(label="Rust"),
        QuestionOption(label="Go", description="fast builds"),
    ),
)
FEATURES = Question(
    id="features",
    question="Which features?",
    options=(
        QuestionOption(label="logging"),
        QuestionOption(label="metrics"),
        QuestionOption(label="tracing"),
    ),
    multi_select=True,
)
NAME = Question(id="name", question="What should it be called?")


async def ask(pilot: Pilot[Any], app: Host, questions: Sequence[Question]) -> QuestionScreen:
    screen = QuestionScreen(questions, guard_seconds=0)
    await opened(pilot, app, screen)
    return screen


def option_texts(screen: QuestionScreen) -> list[str]:
    options = screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_question_single_and_multi_select_pages() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ask(pilot, app, [LANGUAGE, FEATURES])
        assert shown(screen.query_one("#header", Static)) == "Question 1 of 2 · Language"
        assert shown(screen.query_one("#question", Static)) == "Which language?"
        assert option_texts(screen) == ["Python\n  the default", "Rust", "Go\n  fast builds"]
        await pilot.press("down", "enter")  # Rust; on to the second page
        await until(pilot, lambda: screen.index == 1)
        assert shown(screen.query_one("#header", Static)) == "Question 2 of 2"
        await pilot.press("space", "down", "down", "space")  # logging, tracing
        assert option_texts(screen) == ["☑ logging", "☐ metrics", "☑ tracing"]
        await pilot.press("up", "up", "space", "space")  # logging off and on again
        assert screen.toggled == {0, 2}
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [
            [
                Answer(id="lang", selected=("Rust",)),
                Answer(id="features", selected=("logging", "tracing")),
            ]
        ]


async def test_question_multi_select_enter_without_toggles_takes_the_highlighted() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await ask(pilot, app, [FEATURES])
        await pilot.press("down", "enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [[Answer(id="features", selected=("metrics",))]]


async def test_question_free_text_and_dismissal() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ask(pilot, app, [LANGUAGE, FEATURES])
        await pilot.press("tab")  # to "Other…"
        other = screen.query_one("#other", Input)
        assert other.has_focus
        await pilot.press("enter")  # nothing typed: no answer yet
        assert screen.index == 0
        other.value = "Zig, please"
        await pilot.press("enter")
        await until(pilot, lambda: screen.index == 1)
        assert screen.query_one(OptionList).has_focus
        assert not other.value
        await pilot.press("space", "tab")
        other.value = "profiling"
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results[-1] == [
            Answer(id="lang", selected=(), custom="Zig, please"),
            Answer(id="features", selected=("logging",), custom="profiling"),
        ]

        await ask(pilot, app, [LANGUAGE])
        await pilot.press("escape")
        await until(pilot, lambda: len(app.results) == 2)
        assert app.results[-1] is None

        screen = await ask(pilot, app, [LANGUAGE, FEATURES])
        await pilot.press("enter")  # the first page answered …
        await until(pilot, lambda: screen.index == 1)
        await pilot.press("tab", "escape")  # … then Esc from the input: all dismissed
        await until(pilot, lambda: len(app.results) == 3)
        assert app.results[-1] is None


async def test_question_without_options_is_an_input() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ask(pilot, app, [NAME])
        assert not screen.query_one(OptionList).display
        other = screen.query_one("#other", Input)
        assert other.has_focus
        assert shown(screen.query_one("#hint", Static)) == "Enter: answer · Esc: dismiss"
        await pilot.press(*"dsh", "enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [[Answer(id="name", custom="dsh")]]


async def test_question_click_picks_an_option() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ask(pilot, app, [LANGUAGE])
        options = screen.query_one(OptionList)
        # Python takes two lines (its description): Rust is on the third.
        assert await pilot.click(options, offset=(options.gutter.left + 2, options.gutter.top + 2))
        await until(pilot, lambda: bool(app.results))
        assert app.results == [[Answer(id="lang", selected=("Rust",))]]


async def test_question_ignores_keys_typed_as_it_opens() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = QuestionScreen([LANGUAGE], guard_seconds=30)  # see the approval's test
        await pilot.press("x")
        app.open(screen)
        await pilot.press("enter", "escape", "o", "k")
        assert app.results == []
        assert app.screen is screen
        await until(pilot, lambda: len(app.typed) == 2)
        assert "".join(app.typed) == "ok"
        screen.guard.seconds = 0
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == [[Answer(id="lang", selected=("Python",))]]


def test_a_question_screen_needs_questions() -> None:
    with pytest.raises(ValueError, match="no questions"):
        QuestionScreen([])


# ---------------------------------------------------------------------- sessions

NOW = int(time.time() * 1000)


@pytest.fixture(autouse=True)
def _fixed_now(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ages on screen are counted to NOW, however long the suite ran before this test.
    monkeypatch.setattr("dsh.ui.tui.screens.sessions.now", lambda: NOW)


def entry(id: str, cwd: str, minutes_ago: int, **fields: Any) -> CatalogEntry:
    return picker_entry(id, cwd, NOW - minutes_ago * 60_000, **fields)


ENTRIES = [
    entry("aaaa1111", "/elsewhere", 1, title="Refactor the parser", cost=0.0123),
    entry("bbbb2222", "/here", 5, first_prompt="fix the flaky test\nin ci"),
    entry("cccc3333", "/here", 3 * 24 * 60, turns=1),
]


async def no_search(text: str) -> list[CatalogEntry]:
    return []


def picker_lines(picker: SessionPicker) -> list[str]:
    options = picker.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_session_picker_lists_this_directory_first_and_searches() -> None:
    searched: list[str] = []

    async def search(text: str) -> list[CatalogEntry]:
        searched.append(text)
        return [ENTRIES[2]] if text == "flaky" else []

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        picker = SessionPicker(ENTRIES, "/here", search, search_delay=0.05)
        await opened(pilot, app, picker)
        assert [e.id for e in picker.shown] == ["bbbb2222", "cccc3333", "aaaa1111"]
        assert picker.query_one("#search", Input).has_focus
        lines = picker_lines(picker)
        assert lines[0] == "fix the flaky test\n  5 min ago · 2 turns · bbbb2222"
        assert lines[1] == "(untitled)\n  3 d ago · 1 turn · cccc3333"
        assert (
            lines[2]
            == "Refactor the parser\n  1 min ago · 2 turns · $0.0123 · /elsewhere · aaaa1111"
        )

        search_input = picker.query_one("#search", Input)
        search_input.value = "flaky"  # the first prompt matches locally, the search adds one
        await until(pilot, lambda: searched == ["flaky"] and len(picker.shown) == 2)
        assert [e.id for e in picker.shown] == ["bbbb2222", "cccc3333"]
        await pilot.press("down", "enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == ["cccc3333"]

        await opened(pilot, app, SessionPicker(ENTRIES, "/here", search))
        await pilot.press("escape")
        await until(pilot, lambda: len(app.results) == 2)
        assert app.results[-1] is None


async def test_session_picker_enter_picks_the_first_and_search_debounces() -> None:
    calls: list[str] = []

    async def search(text: str) -> list[CatalogEntry]:
        calls.append(text)
        await asyncio.sleep(0)
        return []

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        picker = SessionPicker(ENTRIES, "/here", search, search_delay=0.2)
        await opened(pilot, app, picker)
        field = picker.query_one("#search", Input)
        for text in ("r", "re", "ref"):
            field.value = text
            await pilot.pause()
        await until(pilot, lambda: bool(calls))
        await pilot.pause(0.1)
        assert calls == ["ref"]  # one search once typing paused
        assert [e.id for e in picker.shown] == ["aaaa1111"]
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == ["aaaa1111"]


async def test_session_picker_moves_with_arrows_and_clears_the_search() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        picker = SessionPicker(ENTRIES, "/here", no_search, search_delay=0.01)
        await opened(pilot, app, picker)
        options = picker.query_one(OptionList)
        await pilot.press("down", "down", "down")  # stops at the last one
        assert options.highlighted == 2
        await pilot.press("pageup")
        assert options.highlighted == 0
        await pilot.press("z")
        await until(pilot, lambda: not picker.shown)
        assert picker_lines(picker) == ["no sessions found"]
        await pilot.press("enter", "down")  # nothing to resume, nothing to move to
        assert app.results == []
        await pilot.press("backspace")
        await until(pilot, lambda: len(picker.shown) == 3)
        await pilot.press("down", "enter")
        await until(pilot, lambda: bool(app.results))
        assert app.results == ["cccc3333"]


async def test_session_picker_survives_a_failing_search() -> None:
    async def broken(text: str) -> list[CatalogEntry]:
        raise RuntimeError("index is locked")

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        picker = SessionPicker(ENTRIES, "/here", broken, search_delay=0.01)
        await opened(pilot, app, picker)
        picker.query_one("#search", Input).value = "parser"
        hint = picker.query_one("#hint", Static)
        await until(pilot, lambda: "search failed" in shown(hint))
        assert "index is locked" in shown(hint)
        assert [e.id for e in picker.shown] == ["aaaa1111"]  # the local match stays
        assert app.screen is picker


def test_here_first_and_local_matches() -> None:
    assert [e.id for e in here_first(ENTRIES, "/elsewhere")] == [
        "aaaa1111",
        "bbbb2222",
        "cccc3333",
    ]
    assert [e.id for e in local_matches(ENTRIES, "FLAKY ci")] == ["bbbb2222"]
    assert [e.id for e in local_matches(ENTRIES, "/here")] == ["bbbb2222", "cccc3333"]
    assert [e.id for e in local_matches(ENTRIES, "cccc")] == ["cccc3333"]
    assert local_matches(ENTRIES, "parser flaky") == []


async def test_catalog_search_finds_sessions_by_what_was_written(tmp_path: Path) -> None:
    from dsh.llm import user_text
    from dsh.session.catalog import Catalog
    from dsh.session.events import SessionEvent
    from dsh.session.header import SessionHeader

    catalog = Catalog(tmp_path)
    try:
        header = SessionHeader(id="s" * 32, cwd="/here", created_at=NOW)
        events = [
            SessionEvent(seq=0, type="user/message", time=NOW, data=user_text("hello zebra")),
            SessionEvent(seq=1, type="user/message", time=NOW, data=user_text("zebra again")),
        ]
        await catalog.record(header, events, backend="jsonl", location=None)
        found = await catalog_search(catalog)("zeb")
        assert [e.id for e in found] == ["s" * 32]  # two hits, one session
        assert found[0].first_prompt == "hello zebra"
        assert await catalog_search(catalog)("giraffe") == []
    finally:
        await catalog.close()


def test_format_age() -> None:
    assert format_age(5_000) == "just now"
    assert format_age(-5_000) == "just now"
    assert format_age(3 * 60_000) == "3 min ago"
    assert format_age(2 * 3_600_000) == "2 h ago"
    assert format_age(2 * 86_400_000) == "2 d ago"
    assert format_age(90 * 86_400_000) == "3 mo ago"
    assert format_age(800 * 86_400_000) == "2 y ago"
