"""Copying: the terminal's clipboard (OSC 52) and a system clipboard program, faked by
scripts on PATH; and which answers ``/copy`` finds."""

from __future__ import annotations

import asyncio
import shutil
import stat
import sys
import threading
from pathlib import Path

import pytest
from textual.app import App

from dsh.ui.entries import AnswerEntry, ReasoningEntry, UserEntry
from dsh.ui.tui import clipboard
from dsh.ui.tui.clipboard import (
    clipboard_command,
    copy_text,
    last_answers,
    system_copy,
    terminal_copy,
)

CAT = shutil.which("cat")
SLEEP = shutil.which("sleep")
"""Found before the tests narrow PATH down to a folder of fake programs."""


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH of our own and no display: no clipboard program unless a test
    puts one there."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    for name in ("WAYLAND_DISPLAY", "DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    return folder


def fake_program(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_program_follows_the_session(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert clipboard_command() is None
    xsel = fake_program(bin_dir, "xsel", "exit 0")
    assert clipboard_command() is None  # no display to talk to
    monkeypatch.setenv("DISPLAY", ":0")
    assert clipboard_command() == [str(xsel), "-b", "-i"]
    xclip = fake_program(bin_dir, "xclip", "exit 0")
    assert clipboard_command() == [str(xclip), "-selection", "clipboard"]
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    wl_copy = fake_program(bin_dir, "wl-copy", "exit 0")
    assert clipboard_command() == [str(wl_copy)]
    monkeypatch.delenv("WAYLAND_DISPLAY")
    monkeypatch.delenv("DISPLAY")
    monkeypatch.setattr(sys, "platform", "darwin")
    pbcopy = fake_program(bin_dir, "pbcopy", "exit 0")
    assert clipboard_command() == [str(pbcopy)]


def test_system_copy_reports_what_happened(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert system_copy("x") == (None, None)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    out = tmp_path / "copied.txt"
    fake_program(bin_dir, "wl-copy", f'{CAT} > "{out}"')
    assert system_copy("héllo\nworld") == ("wl-copy", None)
    assert out.read_text(encoding="utf-8") == "héllo\nworld"

    fake_program(bin_dir, "wl-copy", "exit 3")
    assert system_copy("x") == (None, "wl-copy failed with exit status 3")

    monkeypatch.setattr(clipboard, "TIMEOUT", 0.2)
    fake_program(bin_dir, "wl-copy", f"exec {SLEEP} 5")
    assert system_copy("x") == (None, "wl-copy timed out")

    (bin_dir / "wl-copy").write_text("no shebang, not runnable")
    program, problem = system_copy("x")
    assert program is None
    assert problem is not None
    assert problem.startswith("wl-copy failed: ")


async def test_copy_text_uses_both_clipboards(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    app: App[None] = App()
    async with app.run_test():
        assert copy_text(app, "a") == "copied 1 character (terminal clipboard)"
        assert app.clipboard == "a"

        monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
        out = tmp_path / "copied.txt"
        fake_program(bin_dir, "wl-copy", f'{CAT} > "{out}"')
        text = "x" * 1234
        said = copy_text(app, text)
        assert said == "copied 1,234 characters (terminal clipboard + wl-copy)"
        assert app.clipboard == text
        assert out.read_text() == text

        fake_program(bin_dir, "wl-copy", "exit 1")
        said = copy_text(app, "ab")
        assert said == (
            "copied 2 characters (terminal clipboard; wl-copy failed with exit status 1)"
        )
        assert app.clipboard == "ab"


async def test_copy_text_from_a_thread_hands_the_terminal_copy_to_the_app(
    bin_dir: Path,
) -> None:
    app: App[None] = App()
    async with app.run_test() as pilot:
        loop_thread: list[int] = []

        def copy(text: str) -> None:
            loop_thread.append(threading.get_ident())
            App.copy_to_clipboard(app, text)

        app.copy_to_clipboard = copy  # type: ignore[method-assign]
        said = await asyncio.to_thread(copy_text, app, "from a thread")
        await pilot.pause()
        assert said == "copied 13 characters (terminal clipboard)"
        assert app.clipboard == "from a thread"
        assert loop_thread == [threading.get_ident()]  # ran on the app's thread

        terminal_copy(app, "on the loop")
        assert app.clipboard == "on the loop"


def test_terminal_copy_without_a_running_app() -> None:
    app: App[None] = App()
    terminal_copy(app, "kept")
    assert app.clipboard == "kept"


def answer(seq: int, turn: int, step: int, *parts: str) -> AnswerEntry:
    return AnswerEntry(f"a{seq}", seq, turn=turn, step=step, parts=list(parts), done=True)


def test_last_answers_are_steps_newest_first() -> None:
    entries = [
        UserEntry("u0", 0, text="hi"),
        answer(1, 1, 1, "First ", "answer."),
        ReasoningEntry("r2", 2, turn=1, step=2, parts=["thinking"]),
        answer(3, 1, 2, "Part one.\n"),
        answer(4, 1, 2, "  "),
        answer(5, 1, 2, "Part two."),
        answer(6, 2, 1, "   "),  # a step with no text
        answer(7, 2, 2, "Latest."),
    ]
    assert last_answers(entries) == ["Latest.", "Part one.\n\nPart two.", "First answer."]
    assert last_answers([]) == []
