"""Plain mode in a real terminal (tmux): what its prompt leaves on the screen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.support.tmux import TMUX, Terminal, child_env, says

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


PLAN = "# Add a notes file\n\n1. Write `notes.md` with one line.\n\nRisk: none, it is new.\n"


def write(path: Path, content: str) -> Reply:
    return Reply(
        tool_calls=[
            ToolCallSpec(name="write", arguments={"file_path": str(path), "content": content})
        ]
    )


def present(plan: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="exit_plan_mode", arguments={"plan": plan})])


def tool_messages(server: FakeLLM, request: int) -> list[str]:
    messages = server.chat_requests[request].body["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


async def start_plain(tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal) -> Path:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh", "--plain"]
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for("/help for commands")
    return project


async def test_an_approved_plan_lets_the_next_write_run_unasked_in_the_same_turn(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    project = tmp_path / "project"
    notes = project / "notes.md"
    fake_llm.add(
        write(notes, "too soon\n"),  # refused in plan mode
        present(PLAN),
        write(notes, "hello\n"),
        Reply(text="The notes file is written."),
    )
    await start_plain(tmp_path, fake_llm, terminal)
    await terminal.keys("/plan add a notes file", "Enter")
    await terminal.wait_for("Permission mode is now plan")
    screen = await terminal.wait_for("Plan: [1] approve, accept edits")
    assert says("[1] approve, accept edits / [2] approve, ask as usual / [3] keep planning")(screen)
    assert "Risk: none, it is new." in screen  # the plan, rendered
    assert "? The plan is ready:\n  Add a notes file\n" in screen
    assert not notes.exists()
    await terminal.keys("1", "Enter")
    screen = await terminal.wait_for("turn 1 · completed")
    assert "Permission mode is now accept-edits" in screen
    assert "Allow?" not in screen  # the write ran unasked
    assert notes.read_text() == "hello\n"
    refused, approved = tool_messages(fake_llm, 2)
    assert "plan mode" in refused
    assert approved.startswith("The user approved your plan. Permission mode is now accept-edits")
    await terminal.keys("C-d")
    assert await terminal.wait_exit() == "0"


async def test_a_note_typed_at_the_plan_sends_it_back_to_the_model(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(present(PLAN), Reply(text="I will revise the plan."))
    await start_plain(tmp_path, fake_llm, terminal)
    await terminal.keys("/plan add a notes file", "Enter")
    await terminal.wait_for("Plan: [1] approve, accept edits")
    await terminal.keys("put it under docs/ instead", "Enter")
    await terminal.wait_for("turn 1 · completed")
    [sent_back] = tool_messages(fake_llm, 1)
    assert "keep planning" in sent_back
    assert "Their note: put it under docs/ instead." in sent_back
    await terminal.keys("/permissions", "Enter")
    screen = await terminal.wait_for("Permission mode: plan")
    assert "Permission mode is now" in screen  # only /plan's change
    assert screen.count("Permission mode is now") == 1
    await terminal.keys("C-d")
    assert await terminal.wait_exit() == "0"
