"""The real ``dsh`` TUI in a real terminal: tmux runs it, the test types and reads
the screen (``capture-pane``), the scripted server answers as the model.

Its own tmux server (a private socket, no user config) so nothing of the person's
tmux is touched; every wait polls the screen and is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.trust import TrustStore

ROOT = Path(__file__).resolve().parent.parent.parent
TMUX = shutil.which("tmux")
TIMEOUT = 15.0  # any one wait; never reached when sound, generous for a loaded box
SESSION = "dsh-e2e"

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


class Terminal:
    """One tmux server on a private socket, running one window of 100x30."""

    def __init__(self, root: Path) -> None:
        self.socket = root / "tmux.sock"
        self.config = root / "tmux.conf"
        self.config.write_text("set -g status off\nset -g default-shell /bin/sh\n")

    async def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        assert TMUX is not None
        child = await asyncio.create_subprocess_exec(
            TMUX,
            "-S",
            str(self.socket),
            "-f",
            str(self.config),
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(child.communicate(), TIMEOUT)
        assert child.returncode == 0, f"tmux {args[0]} failed: {err.decode()}"
        return out.decode()

    async def start(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        """Run ``command`` in the window; its exit status lands in :attr:`status_file`
        (tmux itself may be slow to reap a process on a loaded machine)."""
        line = f"{shlex.join(command)}; echo $? > {shlex.quote(str(self.status_file))}"
        await self.tmux(
            "new-session", "-d", "-s", SESSION, "-x", "100", "-y", "30", "-c", str(cwd),
            line,
            env=env,
        )  # fmt: skip

    @property
    def status_file(self) -> Path:
        return self.socket.parent / "exit-status"

    def exit_status(self) -> str:
        """The command's exit status once it has ended, else ``""``."""
        try:
            return self.status_file.read_text().strip()
        except FileNotFoundError:
            return ""

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", SESSION)

    async def keys(self, *keys: str, literal: bool = False) -> None:
        await self.tmux("send-keys", "-t", SESSION, *(["-l"] if literal else []), *keys)

    async def wait_for(self, wanted: str | Callable[[str], bool], limit: float = TIMEOUT) -> str:
        """The screen once it shows ``wanted`` (or ``wanted(screen)`` holds)."""
        check = wanted if callable(wanted) else (lambda text: wanted in text)
        deadline = time.monotonic() + limit
        while True:
            text = await self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {wanted!r}; the screen:\n{text}")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        if self.socket.exists():
            with contextlib.suppress(AssertionError):  # already gone
                await self.tmux("kill-server")


@pytest.fixture
async def terminal(tmp_path: Path) -> AsyncIterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        await term.close()


def child_env(home: Path, server: FakeLLM) -> dict[str, str]:
    cleared = ("DSH_", "DEEPSEEK_", "OPENAI_", "TMUX", "NO_COLOR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(cleared)}
    env.update(
        DSH_HOME=str(home),
        DEEPSEEK_API_KEY="sk-test",
        DSH_PLUGINS__LLM_DEEPSEEK__BASE_URL=server.base_url,
        DSH_PLUGINS__TITLE__GENERATE="false",
        PYTHONPATH=str(ROOT),
    )
    return env


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
    await terminal.start(command, project, child_env(home, fake_llm))

    await terminal.wait_for("/help lists commands")  # the session is open
    await terminal.keys("say hi from the shell", literal=True)
    await terminal.keys("Enter")
    dialog = await terminal.wait_for("Allow once")
    assert "echo hi" in dialog
    # The dialog ignores keys for its first 0.15 s: press again while it stays.
    for _ in range(20):
        await terminal.keys("y")
        try:
            await terminal.wait_for(lambda text: "Allow once" not in text, limit=0.4)
            break
        except AssertionError:
            continue
    screen = await terminal.wait_for("turn 1 · completed")
    assert "✓ bash echo hi" in screen
    assert "The shell said hi back." in screen
    card = screen.split("✓ bash echo hi", 1)[1].split("The shell said", 1)[0]
    assert "hi" in [line.strip() for line in card.splitlines()]  # the command's output
    status_line = [line for line in screen.splitlines() if line.strip()][-1]
    assert "idle" in status_line
    assert "tokens" in status_line
    assert len(fake_llm.chat_requests) == 2

    await terminal.keys("C-q")
    deadline = time.monotonic() + TIMEOUT
    while not (status := terminal.exit_status()):
        assert time.monotonic() < deadline, "dsh did not exit after Ctrl+Q"
        await asyncio.sleep(0.05)
    assert status == "0"


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
    # No button has focus yet: the letters and Enter are for the prompt behind.
    await terminal.keys("hello", literal=True)
    await terminal.wait_for(lambda text: any("hello" in line for line in text.splitlines()))
    await terminal.keys("Enter")
    await terminal.wait_for("your message goes out when ready")
    screen = await terminal.screen()
    assert "Trust this folder?" in screen  # not answered by any of it
    assert not (home / "trust.toml").exists()
    assert fake_llm.chat_requests == []

    await terminal.keys("Tab")
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
