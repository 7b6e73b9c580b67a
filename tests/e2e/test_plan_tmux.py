"""Plan mode in the real ``dsh`` TUI in a real terminal (tmux): Shift+Tab into plan
mode, a write refused, the plan dialog with the model's plan, and its answers: approved
with accept-edits, the next write runs unasked in the same turn; sent back with a typed
note, the model's next request holds the note and the mode stays plan."""

from __future__ import annotations

import asyncio
import sys

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, of_type, text_of
from tests.support.tmux import TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

PLAN = """# Greet by name

1. Create `greet.py` that prints a greeting.
2. Nothing else changes.
"""
DIALOG = "The plan is ready. Carry it out?"


def write(path: str, content: str) -> ToolCallSpec:
    return ToolCallSpec(name="write", arguments={"file_path": path, "content": content})


def present(plan: str) -> ToolCallSpec:
    return ToolCallSpec(name="exit_plan_mode", arguments={"plan": plan})


def status_line(screen: str) -> str:
    """The screen's last line with anything on it (none yet as dsh starts)."""
    lines = [line for line in screen.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def tool_results(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [text_of(m) for m in messages if m["role"] == "tool"]


async def test_an_approved_plan_carries_on_in_accept_edits_in_a_real_terminal(
    dsh: Dsh, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(
        Reply(tool_calls=[write("greet.py", "print('hi')\n")]),  # refused: planning
        Reply(tool_calls=[present(PLAN)]),
        Reply(tool_calls=[write("greet.py", "print('hi')\n")]),  # the plan, carried out
        Reply(text="Wrote greet.py."),
    )
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, dsh.project, child_env(dsh.home, fake_llm))
    await terminal.wait_for(says("/help lists commands"))
    assert "⏵" not in status_line(await terminal.screen())  # default mode
    await terminal.keys("BTab")
    await terminal.wait_for(lambda text: "⏵ accept-edits" in status_line(text))
    await terminal.keys("BTab")
    await terminal.wait_for(lambda text: "⏵ plan" in status_line(text))

    await terminal.keys("make a greeting", literal=True)
    await terminal.keys("Enter")
    dialog = await terminal.wait_for(DIALOG)
    assert "Greet by name" in dialog
    assert "Create greet.py that prints a greeting." in dialog
    assert "1 Approve, accept edits" in dialog
    assert "waiting for you" in status_line(dialog)
    assert not (dsh.project / "greet.py").exists()  # the first write was refused
    refused = tool_results(fake_llm.chat_requests[1].body)[-1]
    assert "plan mode" in refused

    await terminal.press_until("1", DIALOG)
    done = await terminal.wait_for(
        lambda text: "turn 1 · completed" in text and "idle" in status_line(text)
    )
    assert "Wrote greet.py." in done
    assert "⏵ accept-edits" in status_line(done)
    assert (dsh.project / "greet.py").read_text() == "print('hi')\n"
    approved, written = tool_results(fake_llm.chat_requests[-1].body)[-2:]
    assert "approved" in approved
    assert "accept-edits" in approved
    assert "Error" not in written

    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"
    events = await dsh.checked_events()
    # The first write was refused by the mode; the second ran unasked (accept-edits
    # decided it), in the same turn as the plan: nobody was asked about either.
    resolved = [(e.data.outcome, e.data.by) for e in of_type(events, "approval/resolved")]
    assert resolved == [("deny", "mode"), ("allow-once", "mode")]
    [reviewed] = [e.data for e in of_type(events, "plan/reviewed")]
    assert (reviewed.outcome, reviewed.mode) == ("accept-edits", "accept-edits")
    assert len(of_type(events, "turn/start")) == 1


async def test_keep_planning_sends_the_typed_note_back_in_a_real_terminal(
    dsh: Dsh, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(tool_calls=[present(PLAN)]), Reply(text="I will split it up."))
    command = [
        "env", "TERM=xterm-256color", sys.executable, "-m", "dsh",
        "--permission-mode", "plan",
    ]  # fmt: skip
    await terminal.start(command, dsh.project, child_env(dsh.home, fake_llm))
    await terminal.wait_for(lambda text: "⏵ plan" in status_line(text))
    await terminal.keys("make a greeting", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for(DIALOG)
    await terminal.press_until("3", "1 Approve, accept edits")  # the note opens
    await terminal.wait_for("What should change?")
    await asyncio.sleep(0.1)
    await terminal.keys("use two files, 1 per step", literal=True)
    await terminal.wait_for("use two files, 1 per step")
    await terminal.keys("Enter")
    done = await terminal.wait_for(
        lambda text: "turn 1 · completed" in text and "idle" in status_line(text)
    )
    assert DIALOG not in done
    assert "I will split it up." in done
    assert "⏵ plan" in status_line(done)
    [sent_back] = tool_results(fake_llm.chat_requests[-1].body)
    assert "keep planning" in sent_back.lower()
    assert "use two files, 1 per step" in sent_back
    assert not (dsh.project / "greet.py").exists()

    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"
    events = await dsh.checked_events()
    [reviewed] = [e.data for e in of_type(events, "plan/reviewed")]
    assert (reviewed.outcome, reviewed.note, reviewed.mode) == (
        "keep-planning",
        "use two files, 1 per step",
        None,
    )
