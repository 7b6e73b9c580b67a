"""Copying with the mouse in a real terminal: tmux runs the real ``dsh``, the test
drags over an answer with the mouse bytes a terminal sends (SGR mode), and reads what
dsh put on the terminal's clipboard: dsh copies with OSC 52, which tmux (with
``set-clipboard on``) keeps as its newest paste buffer."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from dsh.testing import FakeLLM, Reply
from tests.support.tmux import TIMEOUT, TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

ANSWER = "The **answer** says: copy me exactly, please.\n\nA second paragraph: 漢字 too."


@pytest.fixture
async def terminal(tmp_path: Path) -> AsyncIterator[Terminal]:
    term = Terminal(tmp_path)
    # OSC 52 from the program sets tmux's paste buffer (and no outer terminal's).
    term.config.write_text(term.config.read_text() + "set -g set-clipboard on\n")
    try:
        yield term
    finally:
        await term.close()


def mouse(button: int, x: int, y: int, *, release: bool = False) -> list[str]:
    """The SGR mouse report for screen cell (x, y), counted from 0, as hex bytes
    for ``send-keys -H``."""
    report = f"\x1b[<{button};{x + 1};{y + 1}{'m' if release else 'M'}"
    return [f"{ord(c):02x}" for c in report]


async def clipboard(terminal: Terminal) -> str:
    """tmux's newest paste buffer, or "" when there is none yet."""
    listed = await terminal.tmux("list-buffers", "-F", "#{buffer_name}")
    if not listed.strip():
        return ""
    return await terminal.tmux("show-buffer")


async def test_dragging_over_an_answer_copies_its_text(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(text=ANSWER))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for(says("/help lists commands"))
    await terminal.keys("say something", literal=True)
    await terminal.keys("Enter")
    screen = await terminal.wait_for(
        lambda text: "turn 1 · completed" in text and "A second paragraph" in text
    )
    rows = screen.splitlines()
    first = next(y for y, row in enumerate(rows) if "The answer says" in row)
    second = next(y for y, row in enumerate(rows) if "A second paragraph" in row)
    # Cells, not characters: 漢 and 字 take two cells each.
    start = cell_len(rows[first][: rows[first].index("answer says")])
    end = cell_len(rows[second][: rows[second].index("字")])  # its first cell

    await terminal.keys("-H", *mouse(0, start, first))
    await terminal.keys("-H", *mouse(32, start + 3, first))  # dragging (button held)
    await terminal.keys("-H", *mouse(32, end, second))
    await terminal.keys("-H", *mouse(0, end, second, release=True))

    deadline = time.monotonic() + TIMEOUT
    while not (copied := await clipboard(terminal)):
        assert time.monotonic() < deadline, "nothing reached the clipboard"
        await asyncio.sleep(0.05)
    assert copied == "answer says: copy me exactly, please.\n\nA second paragraph: 漢字"
    assert "AnswerView" not in copied
