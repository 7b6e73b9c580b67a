"""Rewinding in the real ``dsh`` TUI in a real terminal (tmux): Esc Esc typed as a
person types it, the picker, the summary, and the code and conversation gone back,
the first prompt in the prompt box; sent again, the request holds only it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import user_texts
from tests.support.tmux import TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def write(path: str, content: str) -> ToolCallSpec:
    return ToolCallSpec(name="write", arguments={"file_path": path, "content": content})


async def test_escape_twice_rewinds_to_the_first_turn_in_a_real_terminal(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(tool_calls=[write("one.txt", "one\n")]), Reply(text="Wrote one."))
    fake_llm.add(Reply(tool_calls=[write("two.txt", "two\n")]), Reply(text="Wrote two."))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / "kept.txt").write_text("kept\n")
    command = [
        "env", "TERM=xterm-256color", sys.executable, "-m", "dsh",
        "--permission-mode", "bypass",
    ]  # fmt: skip
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for(says("/help lists commands"))
    await terminal.keys("first prompt", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for("Wrote one.")
    await terminal.wait_for(lambda text: "turn 1 · completed" in text)
    await terminal.keys("second prompt", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for(lambda text: "turn 2 · completed" in text)
    assert (project / "two.txt").exists()

    # Esc Esc as a person presses it: two presses, a moment apart.
    await terminal.keys("Escape")
    await asyncio.sleep(0.15)
    await terminal.keys("Escape")
    picker = await terminal.wait_for("Rewind to before a turn")
    assert "second prompt" in picker
    assert "two.txt" in picker
    assert "first prompt" in picker

    await terminal.keys("Down")
    await terminal.keys("Enter")
    choices = await terminal.wait_for(says("remove one.txt"))
    assert "Restore code and conversation" in choices
    assert says("network calls")(choices)
    await terminal.keys("Enter")  # code and conversation
    back = await terminal.wait_for(says("Rewound the code and conversation to before turn 1"))
    assert "Rewind to before a turn" not in back
    assert not (project / "one.txt").exists()
    assert not (project / "two.txt").exists()
    assert (project / "kept.txt").read_text() == "kept\n"

    fake_llm.add(Reply(text="Again from the start."))
    await terminal.keys("Enter")  # the first prompt, back in the prompt box
    await terminal.wait_for("Again from the start.")
    texts = user_texts(fake_llm.chat_requests[-1].body)
    assert texts[-1] == "first prompt"
    assert sum("first prompt" in text for text in texts) == 1
    assert not any("second prompt" in text for text in texts)
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"
