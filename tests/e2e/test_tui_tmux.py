"""The real ``dsh`` TUI in a real terminal: tmux runs it, the test types and reads
the screen (``capture-pane``), the scripted server answers as the model.

Its own tmux server (a private socket, no user config) so nothing of the person's
tmux is touched; every wait polls the screen and is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.trust import TrustStore
from tests.support.tmux import TIMEOUT, TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def last_line(screen: str) -> str:
    """The status line: the screen's last line with anything on it."""
    return [line for line in screen.splitlines() if line.strip()][-1]


async def test_a_prompt_an_approval_and_an_answer_in_a_real_terminal(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="bash", arguments={"command": "echo hi", "description": "Say hi"})
            ]
        )
    )
    fake_llm.add(Reply(text="The shell said **hi** back."))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, project, child_env(home, fake_llm), record=True)

    await terminal.wait_for(says("/help lists commands"))  # the session is open
    await terminal.keys("say hi from the shell", literal=True)
    await terminal.keys("Enter")
    dialog = await terminal.wait_for("Allow once")
    assert "echo hi" in dialog
    await terminal.press_until("y", "Allow once")  # the dialog ignores keys at first
    # (the turn's line and the idle status line may land in different frames)
    screen = await terminal.wait_for(
        lambda text: "turn 1 · completed" in text and "idle" in last_line(text)
    )
    assert "✓ bash echo hi" in screen
    assert "The shell said hi back." in screen
    card = screen.split("✓ bash echo hi", 1)[1].split("The shell said", 1)[0]
    assert "hi" in [line.strip() for line in card.splitlines()]  # the command's output
    assert "tokens" in last_line(screen)
    assert len(fake_llm.chat_requests) == 2

    await terminal.keys("C-q")
    deadline = time.monotonic() + TIMEOUT
    while not (status := terminal.exit_status()):
        assert time.monotonic() < deadline, "dsh did not exit after Ctrl+Q"
        await asyncio.sleep(0.05)
    assert status == "0"
    # Once the UI has left the alternate screen: the way back to this session.
    [session] = [p.name for p in (home / "sessions").glob("*/*") if p.is_dir()]
    after = terminal.raw().rpartition(b"\x1b[?1049l")[2]
    assert f"Resume this session with: dsh --resume {session}".encode() in after


async def test_the_trust_dialog_of_a_hostile_project_in_a_real_terminal(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """A cloned project asks for ``bypass``: the dialog shows before anything runs,
    what is typed meanwhile waits in the prompt, Tab Enter (the first answer) does
    not trust it, and the first message then goes out under the user's own mode."""
    fake_llm.add(Reply(text="Hello from the model."))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (project / ".git").mkdir(parents=True)
    (project / ".dsh").mkdir()
    settings = project / ".dsh" / "settings.toml"
    settings.write_text('[permissions]\nmode = "bypass"\n')
    settings.chmod(0o644)
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, project, child_env(home, fake_llm))

    dialog = await terminal.wait_for("Trust this folder?", limit=2 * TIMEOUT)  # a cold start
    assert 'permissions.mode = "bypass"' in dialog
    # Letters are for the prompt behind, and so is the Enter that follows them
    # (though Decide later has focus).
    await terminal.keys("hello", literal=True)
    await terminal.wait_for(lambda text: any("hello" in line for line in text.splitlines()))
    await terminal.keys("Enter")
    await terminal.wait_for("your message goes out when ready")
    screen = await terminal.screen()
    assert "Trust this folder?" in screen  # not answered by any of it
    assert not (home / "trust.toml").exists()
    assert fake_llm.chat_requests == []

    await terminal.keys("Tab")  # from Decide later round to the first answer
    await terminal.keys("Enter")
    screen = await terminal.wait_for("Hello from the model.")
    assert "Trust this folder?" not in screen
    assert "This folder is not trusted" in screen
    assert "permissions.mode" in screen.split("This folder is not trusted", 1)[1]
    decisions = TrustStore(home).decisions()
    assert {str(d.root): d.trusted for d in decisions} == {str(project.resolve()): False}
    [request] = fake_llm.chat_requests
    users = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
    assert users[-1] == "hello"

    await terminal.keys("C-q")
    deadline = time.monotonic() + TIMEOUT
    while not (status := terminal.exit_status()):
        assert time.monotonic() < deadline, "dsh did not exit after Ctrl+Q"
        await asyncio.sleep(0.05)
    assert status == "0"


async def test_text_and_enter_in_one_burst_even_while_starting(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """Terminal automation types text and Enter in one write: right after launch
    (the runtime still loading) and again later; each time all of it is sent."""
    fake_llm.add(Reply(text="Answer one."))
    fake_llm.add(Reply(text="Answer two."))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for("Ask dsh anything")  # the prompt is up, the runtime may not be
    await terminal.keys("hello there", "Enter")
    await terminal.wait_for("Answer one.")
    await terminal.keys("list files", "Enter")
    screen = await terminal.wait_for("Answer two.")
    assert "Ask dsh anything" in screen  # the prompt is empty again
    sent = [
        [m["content"] for m in request.body["messages"] if m["role"] == "user"][-1]
        for request in fake_llm.chat_requests
    ]
    assert sent == ["hello there", "list files"]
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_a_bracketed_paste_goes_in_once_and_in_order(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(text="Pasted, thanks."))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for(says("/help lists commands"))  # the session is open
    pasted = "alpha line 1\nbeta line 2\ngamma line 3"
    await terminal.tmux("set-buffer", "-b", "dsh-test", pasted)
    await terminal.tmux("paste-buffer", "-p", "-b", "dsh-test", "-t", "dsh-e2e")
    screen = await terminal.wait_for("gamma line 3")
    assert screen.count("alpha line 1") == 1
    await terminal.keys("Enter")
    await terminal.wait_for("Pasted, thanks.")
    [request] = fake_llm.chat_requests
    users = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
    assert users[-1] == pasted
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_sigterm_closes_the_session_with_its_session_end_hook(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    hook = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "hook.py"
    record, pid_file = tmp_path / "end.jsonl", tmp_path / "dsh.pid"
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = json.dumps(f"{sys.executable} {hook} {record} ok")
    (home / "settings.toml").write_text(
        f"[[hooks.SessionEnd]]\nhooks = [{{ command = {command}, timeout = 30 }}]\n"
    )
    dsh = shlex.join(["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"])
    started = f"echo $$ > {shlex.quote(str(pid_file))}; exec {dsh}"
    await terminal.start(["sh", "-c", started], project, child_env(home, fake_llm))
    await terminal.wait_for(says("/help lists commands"))  # the session is open
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    assert await terminal.wait_exit() == "143"
    [payload] = [json.loads(line) for line in record.read_text().splitlines()]
    assert (payload["hook_event_name"], payload["reason"]) == ("SessionEnd", "other")


async def write_parent_and_child(home: Path, project: Path) -> tuple[str, str]:
    """A parent session and the session of a subagent it ran, stored in ``home`` as
    dsh stores them (the child's header names the parent)."""
    from dsh.session import SessionStore
    from tests.session.turns import complete_turn

    store = SessionStore.at(home)
    try:
        parent = await store.create(str(project), model="deepseek-v4-flash")
        complete_turn(parent, "Look into the tests", "The parent's own reply.", with_tool=False)
        child = await store.create(str(project), parent=parent.id, origin="subagent")
        complete_turn(
            child,
            "Where are the \x1b[2Jtests?",
            "The child says: tests/ holds them.",
            with_tool=False,
        )
        await store.close(child)
        await store.close(parent)
        await store.indexed()
    finally:
        await store.aclose()
    return parent.id, child.id


async def test_agents_opens_a_subagents_session_in_a_real_terminal(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    parent, child = await write_parent_and_child(home, project)
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh", "--resume", parent]
    await terminal.start(command, project, child_env(home, fake_llm))
    await terminal.wait_for(says(f"Resumed session {parent[:8]}"))
    await terminal.keys("/agents", literal=True)
    await terminal.keys("Enter")
    listed = await terminal.wait_for("Subagents of this session")
    assert "Where are the ␛[2Jtests?" in listed  # its bytes shown, not obeyed
    assert "completed" in listed
    assert child[:8] in listed

    await terminal.keys("Enter")
    viewer = await terminal.wait_for("The child says: tests/ holds them.")
    assert "read-only · Esc or q" in viewer
    assert f"session {child}" in viewer
    assert "The parent's own reply." not in viewer

    await terminal.keys("Escape")
    back = await terminal.wait_for(lambda text: "The parent's own reply." in text)
    assert "The child says" not in back
    assert "read-only · Esc or q" not in back
    assert fake_llm.chat_requests == []  # nothing was sent to the model
