"""The approval dialog and the turn's habits, in a real terminal: the real ``dsh``
in tmux against the scripted server, asserting on the screen and on the requests.

Issue 36: a key pressed just after the approval dialog appears must answer it (it
landed in the prompt); keys typed while it opens must never answer it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.tui.screens.guard import QUIET_SECONDS
from tests.support.tmux import TIMEOUT, TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

APPROVAL = "Allow once [y]"
ECHO = ToolCallSpec(name="bash", arguments={"command": "echo hi", "description": "Say hi"})


async def start_dsh(tmp_path: Path, server: FakeLLM, term: Terminal) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await term.start(command, project, child_env(home, server))
    await term.wait_for(says("/help lists commands"))  # the session is open


async def requests_reach(server: FakeLLM, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while len(server.chat_requests) < count:
        assert time.monotonic() < deadline, f"{count} requests never reached the server"
        await asyncio.sleep(0.05)


def prompt_box(screen: str) -> str:
    """What the prompt box holds: the lines between its borders."""
    lines = screen.splitlines()
    top = max(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    inside = []
    for line in lines[top + 1 :]:
        if line.lstrip().startswith("╰"):
            break
        inside.append(line.strip().strip("│").strip())
    return " ".join(inside).strip()


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


async def test_y_pressed_just_after_the_dialog_appears_approves(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(tool_calls=[ECHO], gate="answer"))
    fake_llm.add(Reply(text="The shell said hi."))
    await start_dsh(tmp_path, fake_llm, terminal)
    await terminal.keys("say hi", literal=True)
    await terminal.keys("Enter")
    await requests_reach(fake_llm, 1)
    # The person has sent the prompt and waits: the keyboard is quiet, as it is
    # while a model thinks (this sleep sets up the scenario; nothing waits on it).
    await asyncio.sleep(QUIET_SECONDS)
    fake_llm.open_gate("answer")
    await terminal.wait_for(APPROVAL)
    # y the moment the dialog is on screen (the case was 0.1 s after: a key
    # pressed sooner must count as well, once the dialog has been drawn).
    await terminal.keys("y")
    screen = await terminal.wait_for("turn 1 · completed")
    assert APPROVAL not in screen
    assert prompt_box(screen) != "y"  # it answered the dialog, not the prompt
    assert "y" not in prompt_box(screen).split()
    await requests_reach(fake_llm, 2)
    [result] = tool_results(fake_llm.chat_requests[1])
    assert "hi" in result
    assert "denied" not in result.lower()


async def test_a_sentence_typed_as_the_dialog_opens_goes_on_into_the_prompt(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(tool_calls=[ECHO], gate="answer"))
    fake_llm.add(Reply(text="The shell said hi."))
    await start_dsh(tmp_path, fake_llm, terminal)
    await terminal.keys("say hi", literal=True)
    await terminal.keys("Enter")
    await requests_reach(fake_llm, 1)

    # The person types their next message and goes on typing after the dialog has
    # opened: its answer keys (y, a, n, f) among the rest. Each piece goes in one
    # send-keys (its keys read together) and starts with a key that answers nothing,
    # so that a stall of this loaded machine between two pieces (a pause the person
    # did not make) cannot put a pause before an answer key.
    pieces = [" yes", " and", " then", " fan", " out", " yay", " nay"]
    seen = asyncio.Event()

    async def watch() -> None:
        await terminal.wait_for(APPROVAL)
        seen.set()

    watcher = asyncio.create_task(watch())
    sent: list[str] = []
    after_seen = 0  # pieces typed once the dialog was on screen
    try:
        for index in range(200):
            if index == 2:
                fake_llm.open_gate("answer")
            piece = pieces[index % len(pieces)]
            await terminal.keys(piece, literal=True)
            sent.append(piece)
            await asyncio.sleep(0.05)
            if seen.is_set():
                after_seen += 1
                if after_seen >= len(pieces):
                    break
        await asyncio.wait_for(watcher, TIMEOUT)
    finally:
        watcher.cancel()
    text = "".join(sent)

    def all_typed(screen: str) -> bool:
        return prompt_box(screen).replace(" ", "") == text.replace(" ", "")

    screen = await terminal.wait_for(all_typed)
    assert APPROVAL in screen  # nothing answered it
    assert len(fake_llm.chat_requests) == 1

    # Having stopped, read and decided, the person answers: y now approves.
    await asyncio.sleep(QUIET_SECONDS)  # the pause of reading (the scenario)
    await terminal.keys("y")
    screen = await terminal.wait_for("turn 1 · completed")
    await requests_reach(fake_llm, 2)
    [result] = tool_results(fake_llm.chat_requests[1])
    assert "hi" in result
    assert prompt_box(screen).replace(" ", "") == text.replace(" ", "")
