"""Plain mode in a real terminal (tmux): what its prompt leaves on the screen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.support.tmux import TMUX, Terminal, child_env

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


async def test_a_dialog_leaves_no_stray_prompt_line(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    # While a turn runs the prompt stays open ("» "); an approval takes the line from
    # it, and it used to stay drawn above the dialog as a lone "»".
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="bash", arguments={"command": "echo hi", "description": "Hi"})
            ]
        )
    )
    fake_llm.add(Reply(text="The shell said hi back."))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh", "--plain"]
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for("/help for commands")
    await terminal.keys("say hi", "Enter")
    await terminal.wait_for("Allow?")
    await terminal.keys("y", "Enter")
    # The prompt comes back, empty, below the turn (drawn a moment after it ends).
    screen = await terminal.wait_for(
        lambda text: "turn 1 · completed" in text and prompt_back(text)
    )
    lines = [line.rstrip() for line in screen.splitlines()]
    assert "»" not in lines
    assert lines.index("● bash echo hi") + 1 == lines.index("? bash asks to run: echo hi")


def prompt_back(screen: str) -> bool:
    """Whether the empty prompt shows two lines below the answer."""
    lines = [line.rstrip() for line in screen.splitlines()]
    if "The shell said hi back." not in lines:
        return False
    below = lines.index("The shell said hi back.") + 2
    return below < len(lines) and lines[below] == ">"
