"""Copying text out of the TUI, and finding the answers ``/copy`` copies.

The terminal's clipboard (OSC 52, ``App.copy_to_clipboard``) works over SSH and in
tmux, but not in every terminal, and nothing says whether it did. So when a system
clipboard program is at hand (``wl-copy``, ``xclip``, ``xsel``, ``pbcopy``) the text
goes to it too. The program runs with a short timeout; its stdout and stderr go
nowhere, because xclip and wl-copy leave a child behind to serve the selection and
a pipe it inherited would keep us waiting until the timeout.

Public API:

- ``copy_text(app, text) -> str``: copy to both clipboards; returns a line saying what
  happened. It may wait up to :data:`TIMEOUT` for the system program, so call it in a
  thread (``asyncio.to_thread``); from there the terminal copy is handed to the app's
  loop.
- ``terminal_copy(app, text)``: the OSC 52 copy alone, from the app's loop or a thread.
- ``system_copy(text) -> (program | None, problem | None)``: the system program alone.
- ``clipboard_command() -> argv | None``: which system program this session would use.
- ``last_answers(entries) -> [answer, ...]``: the assistant's answers, newest first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from textual.app import App

from dsh.ui.entries import AnswerEntry, Entry

TIMEOUT = 1.0
"""Seconds a clipboard program may take (the app waits meanwhile)."""


def clipboard_command() -> list[str] | None:
    """The system clipboard program for this session, or None: Wayland's, X11's (only
    with a display to talk to), macOS's."""
    candidates: list[list[str]] = []
    if os.environ.get("WAYLAND_DISPLAY"):
        candidates.append(["wl-copy"])
    if os.environ.get("DISPLAY"):
        candidates += [["xclip", "-selection", "clipboard"], ["xsel", "-b", "-i"]]
    if sys.platform == "darwin":
        candidates.append(["pbcopy"])
    for command in candidates:
        program = shutil.which(command[0])
        if program is not None:
            return [program, *command[1:]]
    return None


def terminal_copy(app: App[Any], text: str) -> None:
    """Copy ``text`` with the terminal's clipboard (OSC 52). Safe from any thread: off
    the app's loop the copy is handed to it (the driver is not for threads)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a worker thread: no loop of its own
        try:
            app.call_from_thread(app.copy_to_clipboard, text)
            return
        except RuntimeError:  # the app is not running: no loop to hand it to
            pass
    app.copy_to_clipboard(text)


def system_copy(text: str) -> tuple[str | None, str | None]:
    """Copy ``text`` with the system clipboard program, if there is one: the program's
    name when it worked, and what went wrong when it did not (both None: no program).
    Blocks for up to :data:`TIMEOUT` seconds."""
    command = clipboard_command()
    if command is None:
        return None, None
    name = os.path.basename(command[0])
    try:
        done = subprocess.run(
            command,
            input=text.encode("utf-8"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"{name} timed out"
    except OSError as error:
        return None, f"{name} failed: {error.strerror or error}"
    if done.returncode != 0:
        return None, f"{name} failed with exit status {done.returncode}"
    return name, None


def copy_text(app: App[Any], text: str) -> str:
    """Copy ``text`` to the terminal's clipboard and, when there is one, the system's;
    returns what happened, for a notification. Meant to run in a thread."""
    terminal_copy(app, text)
    used = ["terminal clipboard"]
    program, problem = system_copy(text)
    if program is not None:
        used.append(program)
    count = len(text)
    noun = "character" if count == 1 else "characters"
    how = " + ".join(used) + (f"; {problem}" if problem else "")
    return f"copied {count:,} {noun} ({how})"


def last_answers(entries: Iterable[Entry]) -> list[str]:
    """The assistant's answers, newest first: the text of each model step (its answer
    blocks joined), steps without text left out. ``/copy n`` copies the n-th."""
    steps: dict[tuple[int, int], list[str]] = {}
    for entry in entries:
        if isinstance(entry, AnswerEntry):
            steps.setdefault((entry.turn, entry.step), []).append(entry.text)
    answers = ["\n\n".join(p.strip() for p in parts if p.strip()) for parts in steps.values()]
    return [answer for answer in reversed(answers) if answer.strip()]
