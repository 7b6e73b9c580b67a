"""Calling the person back (``[tui] notify``): the bell or a desktop notification when
an approval or a question waits, or a long turn ends, while the terminal is not
focused. The app runs for real; what it writes is caught at the Textual driver, the
terminal's boundary."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from textual import events
from textual.pilot import Pilot

from dsh.runtime import Runtime
from dsh.settings_tables import TuiTable
from dsh.settings_tui import TableProblem
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.approval import ApprovalDecision
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.attention import (
    MESSAGE_LIMIT,
    Attention,
    Channel,
    choose_channel,
    message,
    sequence,
)
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.question import QuestionScreen
from tests.ui.tui_support import tui, until

HOSTILE = "rm -rf build \x1b]52;c;aGFja2Vk\x07 then \x07\x9b2J and \x1b\\ done"
"""A command that would write the clipboard (OSC 52), ring, and clear the screen
(C1 CSI) if its bytes reached the terminal raw."""
# Every control character, C0 and C1 (newlines and tabs too: a notification is one line).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


@pytest.fixture(autouse=True)
def outside_tmux(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app reads the environment for ``auto`` and for tmux's wrapping: not from the
    terminal these tests happen to run in."""
    for name in ("TMUX", "STY"):
        monkeypatch.delenv(name, raising=False)


@asynccontextmanager
async def captured(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, **request: Any
) -> AsyncIterator[tuple[DshApp, Pilot[int], list[str]]]:
    """The app, its pilot, and everything written to its driver from then on. A
    dialog left waiting is answered at the end, and the turn let finish: the app does
    not close with one open."""
    fake_llm.add(Reply(text="ok"))  # the reply to whatever the last dialog said
    async with tui(runtime, tmp_path, tmp_path / "home", **request) as (app, pilot):
        driver = app._driver
        assert driver is not None
        written: list[str] = []
        write = driver.write

        def capture(data: str) -> None:
            written.append(data)
            write(data)

        driver.write = capture  # type: ignore[method-assign]
        yield app, pilot, written
        await settle(app, pilot)


async def settle(app: DshApp, pilot: Pilot[int]) -> None:
    screen = app.screen
    if isinstance(screen, ApprovalScreen):
        await screen.dismiss(ApprovalDecision(outcome="deny"))
    elif isinstance(screen, QuestionScreen):
        await screen.dismiss(None)
    await until(pilot, lambda: app.agent is None or app.agent.status == "idle", what="idle")


def notifications(written: list[str]) -> list[str]:
    return [w for w in written if w == "\x07" or w.startswith(("\x1b]9;", "\x1b]777;"))]


async def blur(app: DshApp, pilot: Pilot[int]) -> None:
    app.post_message(events.AppBlur())
    await until(pilot, lambda: not app.app_focus, what="the blur")


async def send(app: DshApp, text: str) -> None:
    # Not through keys: a key press tells Textual the terminal has focus again.
    await app.submit(text)


def bash(command: str) -> Reply:
    arguments = {"command": command, "description": "clean up"}
    return Reply(tool_calls=[ToolCallSpec(name="bash", arguments=arguments)])


async def approval_waiting(app: DshApp, pilot: Pilot[int]) -> None:
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval")
    await pilot.pause()


# ---------------------------------------------------------------- the attack


async def test_a_hostile_command_cannot_drive_the_terminal_through_a_notification(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(bash(HOSTILE))
    async with captured(runtime, tmp_path, fake_llm, notify="osc9") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "clean up")
        await approval_waiting(app, pilot)
        [sent] = notifications(written)
        everything = "".join(written)
        assert "\x1b]52" not in everything
        assert "\x9b" not in everything
        assert sent.startswith("\x1b]9;dsh: approval needed — bash: rm -rf build ")
        assert sent.endswith("\x07")
        inside = sent[len("\x1b]9;") : -1]
        assert CONTROL.search(inside) is None  # one ESC and one BEL: the sequence's own
        assert "␛]52;c;aGFja2Vk␇ then ␇␛[2J and ␛\\ done" in inside


@pytest.mark.parametrize("channel", ["osc9", "osc777"])
def test_no_channel_lets_a_control_character_through(channel: Channel) -> None:
    every = "".join(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)))
    text = f"approval needed — bash: {every}{HOSTILE}"
    sent = sequence(channel, text)
    assert CONTROL.findall(sent) == ["\x1b", "\x07"]  # the sequence's own ESC ] … BEL
    assert sent.startswith("\x1b]")
    assert sent.endswith("\x07")
    wrapped = sequence(channel, text, tmux=True)
    assert wrapped == "\x1bPtmux;" + sent.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    assert sequence("bell", text) == "\x07"


# ---------------------------------------------------------------- when, and how


async def test_an_approval_rings_the_bell_while_the_terminal_is_elsewhere(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(bash("rm -rf build"))
    async with captured(runtime, tmp_path, fake_llm, notify="bell") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "clean up")
        await approval_waiting(app, pilot)
        assert notifications(written) == ["\x07"]


async def test_osc9_says_which_approval_waits(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(bash("rm -rf build"))
    async with captured(runtime, tmp_path, fake_llm, notify="osc9") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "clean up")
        await approval_waiting(app, pilot)
        assert notifications(written) == ["\x1b]9;dsh: approval needed — bash: rm -rf build\x07"]


async def test_nothing_while_the_terminal_is_focused(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(bash("rm -rf build"))
    async with captured(runtime, tmp_path, fake_llm, notify="osc9") as (app, pilot, written):
        assert app.app_focus  # focused until the terminal says otherwise
        await send(app, "clean up")
        await approval_waiting(app, pilot)
        assert notifications(written) == []


async def test_nothing_when_notify_is_off(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(bash("rm -rf build"))
    async with captured(runtime, tmp_path, fake_llm, notify="off") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "clean up")
        await approval_waiting(app, pilot)
        assert notifications(written) == []


async def test_focus_back_and_away_again_notifies_the_next_dialog_only(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(bash("rm -rf build"))
    fake_llm.add(bash("rm -rf dist"))
    fake_llm.add(Reply(text="Both gone."))
    async with captured(runtime, tmp_path, fake_llm, notify="osc9") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "clean up")
        await approval_waiting(app, pilot)
        first = app.screen
        app.post_message(events.AppFocus())
        await blur(app, pilot)
        await pilot.pause(0.1)
        assert len(notifications(written)) == 1  # the same dialog still waits
        assert isinstance(first, ApprovalScreen)
        await first.dismiss(ApprovalDecision(outcome="allow_once"))
        await until(pilot, lambda: app.screen is not first, what="the first dialog gone")
        await approval_waiting(app, pilot)
        assert [n.split("— ")[1] for n in notifications(written)] == [
            "bash: rm -rf build\x07",
            "bash: rm -rf dist\x07",
        ]


async def test_a_waiting_question_notifies(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    asked = {
        "id": "c",
        "question": "Which colour?\x1b]0;pwned\x07",
        "options": [{"label": "Red"}, {"label": "Blue"}],
    }
    question = {"questions": [asked]}
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    async with captured(runtime, tmp_path, fake_llm, notify="osc777") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "ask me")
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen), what="the question")
        await pilot.pause()
        assert notifications(written) == [
            "\x1b]777;notify;dsh;a question is waiting — Which colour?␛]0;pwned␇\x07"
        ]


async def test_a_long_turn_says_it_ended(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Done."))
    fake_llm.add(Reply(text="Done again."))
    async with captured(runtime, tmp_path, fake_llm, notify="osc9") as (app, pilot, written):
        await blur(app, pilot)
        await send(app, "quick")
        await until(pilot, lambda: app.agent is not None and app.agent.session.last_turn == 1)
        await until(pilot, lambda: app.agent is not None and app.agent.status == "idle")
        assert notifications(written) == []  # far shorter than LONG_TURN_S
        app.attention.long_turn = 0  # every turn is long enough now
        await send(app, "again")
        await until(pilot, lambda: notifications(written) != [], what="the notification")
        [sent] = notifications(written)
        assert re.fullmatch(r"\x1b\]9;dsh: turn finished \(\d+ s\)\x07", sent)


# ---------------------------------------------------------------- choosing


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TERM_PROGRAM": "iTerm.app", "TERM": "xterm-256color"}, "osc9"),
        ({"LC_TERMINAL": "iTerm2", "TERM": "xterm-256color"}, "osc9"),  # over ssh
        ({"TERM_PROGRAM": "WezTerm", "TERM": "xterm-256color"}, "osc9"),
        ({"TERM": "xterm-kitty"}, "osc9"),
        ({"TERM": "xterm-256color", "KITTY_WINDOW_ID": "3"}, "osc9"),
        ({"TERM_PROGRAM": "ghostty", "TERM": "xterm-ghostty"}, "osc9"),
        ({"TERM": "foot"}, "osc777"),
        ({"TERM": "foot-extra"}, "osc777"),
        ({"TERM": "xterm-256color", "VTE_VERSION": "7600"}, "bell"),  # upstream VTE
        ({"TERM": "xterm-256color", "WT_SESSION": "x"}, "bell"),  # Windows Terminal
        ({"TERM_PROGRAM": "Apple_Terminal", "TERM": "xterm-256color"}, "bell"),
        ({"TERM": "alacritty"}, "bell"),
        ({"TERM": "xterm"}, "bell"),
        ({}, "bell"),
        # tmux: TERM_PROGRAM is tmux's, and what leaked from outside may be stale
        ({"TMUX": "/tmp/tmux-1/default,1,0", "TERM": "tmux-256color"}, "bell"),
        ({"TMUX": "/tmp/t,1,0", "TERM_PROGRAM": "iTerm.app", "TERM": "screen"}, "bell"),
        ({"TMUX": "/tmp/t,1,0", "KITTY_WINDOW_ID": "1", "TERM": "xterm-kitty"}, "bell"),
        ({"STY": "1.pts-0.host", "TERM": "screen.xterm-256color"}, "bell"),
    ],
)
def test_auto_chooses_by_the_terminal(env: dict[str, str], expected: str) -> None:
    assert choose_channel("auto", env) == expected


def test_an_explicit_choice_wins_and_off_is_nothing() -> None:
    iterm = {"TERM_PROGRAM": "iTerm.app"}
    assert choose_channel("bell", iterm) == "bell"
    assert choose_channel("osc777", iterm) == "osc777"
    assert choose_channel("osc9", {"TERM": "xterm"}) == "osc9"
    assert choose_channel("off", iterm) is None


def test_inside_tmux_an_osc_is_wrapped_for_passthrough() -> None:
    assert sequence("osc9", "hi", tmux=True) == "\x1bPtmux;\x1b\x1b]9;dsh: hi\x07\x1b\\"
    assert sequence("osc777", "hi", tmux=True) == ("\x1bPtmux;\x1b\x1b]777;notify;dsh;hi\x07\x1b\\")
    assert sequence("bell", "hi", tmux=True) == "\x07"  # tmux rings the terminal outside


def test_a_message_is_one_line_and_capped() -> None:
    assert message("a\nb\tc\r\n  d") == "a b c d"
    long = message("x" * 1000)
    assert len(long) == MESSAGE_LIMIT
    assert long.endswith("…")


class FakeDriver:
    def __init__(self) -> None:
        self.written: list[str] = []

    def write(self, data: str) -> None:
        self.written.append(data)


def attention(focused: bool, setting: str = "osc9") -> tuple[Attention, FakeDriver]:
    driver = FakeDriver()
    app = SimpleNamespace(_driver=driver, app_focus=focused)
    return Attention(cast(Any, app), setting, env={}), driver


def test_one_notification_per_waiting_dialog() -> None:
    watcher, driver = attention(focused=False)
    with watcher.waiting("a", "approval needed"):
        with watcher.waiting("a", "approval needed"):
            pass
        with watcher.waiting("a", "approval needed"):  # still the same dialog
            pass
        with watcher.waiting("b", "approval needed"):  # another one
            pass
    assert len(driver.written) == 2
    with watcher.waiting("a", "approval needed"):  # a later dialog with that key
        pass
    assert len(driver.written) == 3


def test_nothing_focused_or_without_a_driver() -> None:
    watcher, driver = attention(focused=True)
    assert not watcher.notify("x")
    assert driver.written == []
    watcher.app._driver = None
    watcher.app.app_focus = False
    assert not watcher.notify("x")


def test_notify_is_a_tui_setting() -> None:
    assert TuiTable().notify == "auto"
    assert TuiTable.model_validate({"notify": "osc9"}).notify == "osc9"
    with pytest.raises(TableProblem, match="notify: Input should be 'auto'"):
        TuiTable.model_validate({"notify": "loud"})
