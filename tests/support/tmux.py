"""A real terminal for tests: tmux runs a command in a window, the test types and
reads the screen (``capture-pane``), and can record every byte the command wrote to
its terminal (``pipe-pane``) to check what reached it raw.

Each test gets its own tmux server (a private socket, no user config), so nothing of
the person's tmux is touched; every wait polls and is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

from dsh.testing import FakeLLM
from tests.support.replays import note_settings
from tests.support.waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent.parent
TMUX = shutil.which("tmux")
TIMEOUT = HANG_S  # any one wait: only a hang guard, never reached when sound
SESSION = "dsh-e2e"


class Terminal:
    """One tmux server on a private socket, running one window (100x30 by default)."""

    def __init__(self, root: Path, *, width: int = 100, height: int = 30) -> None:
        self.socket = root / "tmux.sock"
        self.config = root / "tmux.conf"
        # remain-on-exit: the screen of a command that ended can still be read.
        self.config.write_text(
            "set -g status off\nset -g default-shell /bin/sh\nset -g remain-on-exit on\n"
        )
        self.width, self.height = width, height
        self.gate = root / "tmux.go"
        self.recording = root / "tmux.raw"

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

    async def start(
        self, command: list[str], cwd: Path, env: dict[str, str], *, record: bool = False
    ) -> None:
        """Run ``command`` in the window; its exit status lands in :attr:`status_file`
        (tmux itself may be slow to reap a process on a loaded machine). ``record``:
        every byte it writes to the terminal goes to :attr:`recording` too, from its
        very first (it waits for the recording to start)."""
        if "DSH_HOME" in env and Path(env["DSH_HOME"]).is_dir():
            note_settings(Path(env["DSH_HOME"]), env)  # what its sessions replay with
        line = f"{shlex.join(command)}; echo $? > {shlex.quote(str(self.status_file))}"
        if record:
            gate = shlex.quote(str(self.gate))
            line = f"while [ ! -e {gate} ]; do sleep 0.02; done; {line}"
        await self.tmux(
            "new-session", "-d", "-s", SESSION, "-x", str(self.width), "-y", str(self.height),
            "-c", str(cwd), line,
            env=env,
        )  # fmt: skip
        if record:
            target = shlex.quote(str(self.recording))
            await self.tmux("pipe-pane", "-t", SESSION, "-o", f"cat >> {target}")
            self.gate.touch()

    def raw(self) -> bytes:
        """Every byte the command wrote to the terminal so far (when recording)."""
        try:
            return self.recording.read_bytes()
        except FileNotFoundError:
            return b""

    @property
    def status_file(self) -> Path:
        return self.socket.parent / "exit-status"

    def exit_status(self) -> str:
        """The command's exit status once it has ended, else ``""``."""
        try:
            return self.status_file.read_text().strip()
        except FileNotFoundError:
            return ""

    async def wait_exit(self, limit: float = TIMEOUT) -> str:
        deadline = time.monotonic() + limit
        while not (status := self.exit_status()):
            assert time.monotonic() < deadline, "the command did not exit"
            await asyncio.sleep(0.05)
        return status

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", SESSION)

    async def keys(self, *keys: str, literal: bool = False) -> None:
        await self.tmux("send-keys", "-t", SESSION, *(["-l"] if literal else []), *keys)

    async def resize(self, width: int, height: int) -> None:
        """Make the window ``width`` x ``height``, as a person dragging the terminal's
        corner does: the command gets SIGWINCH and the new size."""
        await self.tmux("resize-window", "-t", SESSION, "-x", str(width), "-y", str(height))
        self.width, self.height = width, height

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

    async def press_until(self, key: str, gone: str, *, tries: int = 20) -> None:
        """Press ``key`` until ``gone`` is off the screen: a dialog takes a key only
        once it is there and after a pause in the typing (so that keys meant for the
        prompt do not answer it), so each try waits longer than that pause."""
        from dsh.ui.tui.screens.guard import QUIET_SECONDS

        for _ in range(tries):
            await self.keys(key)
            try:
                await self.wait_for(lambda text: gone not in text, limit=QUIET_SECONDS + 0.2)
                return
            except AssertionError:
                continue
        raise AssertionError(f"{gone!r} stayed on screen after {tries} presses of {key}")

    async def close(self) -> None:
        """End the server, and wait until it has let go of its socket: a terminal
        started again on the same socket while the old server is still exiting (it
        is slow to on a loaded machine) would meet "server exited unexpectedly"."""
        if not self.socket.exists():
            return
        with contextlib.suppress(AssertionError):  # already gone
            await self.tmux("kill-server")
        deadline = time.monotonic() + TIMEOUT
        while _server_listens(self.socket):
            assert time.monotonic() < deadline, "the tmux server did not exit"
            await asyncio.sleep(0.05)
        self.socket.unlink(missing_ok=True)


def _server_listens(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:  # refused, or the file is gone
            return False
    return True


def says(phrase: str) -> Callable[[str], bool]:
    """Whether the screen says ``phrase``, wrapped over lines or not (where a line
    wraps depends on the paths shown, such as the test's temporary folder)."""
    return lambda screen: phrase in " ".join(screen.split())


def child_env(home: Path, server: FakeLLM) -> dict[str, str]:
    """The environment of a dsh in the terminal: the test's home, key and server."""
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
