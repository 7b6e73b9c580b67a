"""Terminals against real programs in real ptys: a Python REPL, a curses program, a
password prompt, Ctrl-C to a running program, and closing what will not stop."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh.hooks import AGENT_DISPOSED
from dsh.kernel import Candidate, Context, PluginHost
from dsh.llm import CallId, SessionId
from dsh.services import TOOLS
from dsh.tools import ToolContext, ToolError, ToolOutput, ToolService
from dsh_plugins.terminal import TERMINALS
from dsh_plugins.terminal import plugin as terminal_plugin
from dsh_plugins.terminal.terminal import sanitize
from tests.support.waits import HANG_S

PY = sys.executable
HANG_MS = round(HANG_S * 1000)  # the longest wait terminal_read takes: only a hang guard

CURSES_PROGRAM = """
import curses

def main(screen):
    curses.curs_set(1)
    screen.addstr(4, 9, "HELLO FROM CURSES")
    screen.addstr(6, 9, "press q to quit")
    screen.move(7, 3)
    screen.refresh()
    while screen.getch() != ord("q"):
        pass

curses.wrapper(main)
print("curses done")
"""


@dataclass
class Terminals:
    root: Context
    cwd: Path
    session: str = "s1"
    _calls: itertools.count[int] = field(default_factory=itertools.count)

    def context(
        self, session: str | None = None, signal: asyncio.Event | None = None
    ) -> ToolContext:
        return ToolContext(
            call_id=CallId(f"call-{next(self._calls)}"),
            agent=None,
            cwd=self.cwd,
            signal=signal or asyncio.Event(),
            session_id=SessionId(session or self.session),
            services=self.root,
        )

    async def call(self, tool: str, session: str | None = None, **arguments: Any) -> ToolOutput:
        definition = self.root.get(TOOLS).get(tool)
        assert definition is not None
        parsed = definition.arguments.model_validate(arguments)
        result = await definition.execute(parsed, self.context(session))
        return ToolOutput(content=result) if isinstance(result, str) else result

    async def text(self, tool: str, **arguments: Any) -> str:
        content = (await self.call(tool, **arguments)).content
        assert isinstance(content, str)
        return content

    async def fails(self, tool: str, code: str, **arguments: Any) -> str:
        with pytest.raises(ToolError) as caught:
            await self.call(tool, **arguments)
        assert caught.value.code == code, caught.value.message
        return caught.value.message

    async def until(
        self, terminal: str, pattern: str, timeout_ms: int = HANG_MS, *, seen: str = ""
    ) -> str:
        """Output up to ``pattern``: in ``seen`` (what the last call returned) or later."""
        if re.search(pattern, seen):
            return seen
        text = await self.text(
            "terminal_read",
            terminal_id=terminal,
            wait="pattern",
            pattern=pattern,
            timeout_ms=timeout_ms,
        )
        assert "[wait: pattern matched]" in text, text
        return text

    async def showing(self, terminal: str, wanted: str) -> ToolOutput:
        """The terminal's screen snapshot once it shows ``wanted``."""
        deadline = time.monotonic() + HANG_S
        while True:
            screen = await self.call("terminal_snapshot", terminal_id=terminal)
            if wanted in str(screen.content):
                return screen
            assert time.monotonic() < deadline, f"{wanted!r} never showed:\n{screen.content}"
            await asyncio.sleep(0.05)


@pytest.fixture
async def terminals(tmp_path: Path) -> AsyncIterator[Terminals]:
    root = Context(name="test")
    root.provide(TOOLS, ToolService(root))
    await PluginHost(root).load([Candidate("terminal", "test", plugin=terminal_plugin)])
    try:
        yield Terminals(root, tmp_path)
    finally:
        await root.dispose()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


async def gone(pid: int, seconds: float = HANG_S) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


def test_sanitize_strips_escapes_and_carriage_returns() -> None:
    raw = "\x1b[1;32mgreen\x1b[0m\r\n\x1b]0;title\x07done\rover\n\x1b(B"
    assert sanitize(raw) == "green\ndone\nover\n"


async def test_a_python_repl(terminals: Terminals) -> None:
    opened = await terminals.text("terminal_open", command=f"{PY} -q -i")
    assert opened.startswith("started terminal t1")
    await terminals.until("t1", ">>> ", seen=opened)
    sent = await terminals.text("terminal_send", terminal_id="t1", text="6 * 7", keys=["Enter"])
    await terminals.until("t1", "42", seen=sent)
    await terminals.text(
        "terminal_send", terminal_id="t1", text="def f(x):\n    return x + 1\n", keys=["Enter"]
    )
    sent = await terminals.text("terminal_send", terminal_id="t1", text="f(41)", keys=["Enter"])
    assert "42" in await terminals.until("t1", "42", seen=sent)
    await terminals.text("terminal_send", terminal_id="t1", keys=["C-d"])
    done = await terminals.text("terminal_read", terminal_id="t1", wait="exit", timeout_ms=HANG_MS)
    assert "[terminal t1: exited code=0]" in done
    await terminals.fails("terminal_send", "TERMINAL_EXITED", terminal_id="t1", text="x")


async def test_a_curses_program_is_read_from_its_screen(
    terminals: Terminals, tmp_path: Path
) -> None:
    (tmp_path / "menu.py").write_text(CURSES_PROGRAM)
    await terminals.text("terminal_open", command=f"{PY} menu.py", rows=20, cols=60)
    screen = await terminals.showing("t1", "HELLO FROM CURSES")
    text = str(screen.content)
    assert "  5|          HELLO FROM CURSES" in text  # row 5, column 10 (1-based)
    assert "cursor at row 8, column 4" in text
    assert screen.meta["screen"][4] == " " * 9 + "HELLO FROM CURSES"
    sent = await terminals.text("terminal_send", terminal_id="t1", text="q")
    done = sent + await terminals.text(
        "terminal_read", terminal_id="t1", wait="exit", timeout_ms=HANG_MS
    )
    assert "curses done" in done
    assert "exited code=0" in done


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
async def test_less_shows_the_top_of_a_file(terminals: Terminals, tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 500)))
    await terminals.text("terminal_open", command="less long.txt", rows=10, cols=40)
    screen = await terminals.showing("t1", "line 9")
    assert screen.meta["screen"][0] == "line 1"
    await terminals.text("terminal_send", terminal_id="t1", text="q")
    assert "exited" in await terminals.text(
        "terminal_read", terminal_id="t1", wait="exit", timeout_ms=HANG_MS
    )


async def test_a_sequence_the_emulator_does_not_know_costs_nothing(
    terminals: Terminals,
) -> None:
    # CSI ? 4 m (xterm's query of its key modifier options, sent by editors) made
    # pyte's screen raise inside the reader, and that chunk never reached the log.
    opened = await terminals.text(
        "terminal_open", command="printf 'before\\033[?4mafter\\n'; sleep 30"
    )
    screen = await terminals.showing("t1", "beforeafter")
    assert screen.meta["screen"][0] == "beforeafter"
    read = await terminals.text("terminal_read", terminal_id="t1")
    assert "beforeafter" in opened + read


async def test_a_password_prompt_reads_without_echo(terminals: Terminals) -> None:
    program = "import getpass; p = getpass.getpass('Password: '); print('got', len(p))"
    opened = await terminals.text("terminal_open", command=f'{PY} -c "{program}"')
    await terminals.until("t1", "Password:", seen=opened.split("\n", 1)[1])
    sent = await terminals.text("terminal_send", terminal_id="t1", text="hunter2", keys=["Enter"])
    done = sent + await terminals.text(
        "terminal_read", terminal_id="t1", wait="exit", timeout_ms=HANG_MS
    )
    assert "got 7" in done
    assert "hunter2" not in done


async def test_ctrl_c_interrupts_a_running_program(terminals: Terminals) -> None:
    opened = await terminals.text("terminal_open")
    await terminals.until("t1", r"\$ ", seen=opened)
    await terminals.text("terminal_send", terminal_id="t1", text="sleep 100", keys=["Enter"])
    await terminals.text("terminal_send", terminal_id="t1", keys=["C-c"])
    sent = await terminals.text(
        "terminal_send", terminal_id="t1", text="echo status=$?", keys=["Enter"]
    )
    assert "status=130" in await terminals.until("t1", "status=130", seen=sent)

    python = f"{PY} -c 'import time; print(\"sleeping\", flush=True); time.sleep(100)'"
    sent = await terminals.text("terminal_send", terminal_id="t1", text=python, keys=["Enter"])
    await terminals.until("t1", "sleeping", seen=sent)
    assert "SIGINT" in await terminals.text("terminal_signal", terminal_id="t1", signal="int")
    assert "KeyboardInterrupt" in await terminals.until("t1", "KeyboardInterrupt")
    await terminals.fails("terminal_signal", "TERMINAL_BAD_SIGNAL", terminal_id="t1", signal="X")


async def test_reading_is_bounded_and_waits_end(terminals: Terminals) -> None:
    opened = await terminals.text("terminal_open", command="seq 1 20000; sleep 600")
    await terminals.until("t1", "20000", seen=opened)
    await terminals.text("terminal_open", command="sleep 0.5; seq 1 20000; sleep 600")
    terminal = terminals.root.get(TERMINALS).of("s1")[1]
    deadline = time.monotonic() + HANG_S
    while "20000" not in terminal.unread():
        assert time.monotonic() < deadline, "the output never came"
        await asyncio.sleep(0.05)
    text = await terminals.text("terminal_read", terminal_id="t2", wait="none", max_bytes=1_000)
    assert "earlier characters not shown" in text
    assert "20000" in text
    assert len(text) < 1_200
    # The program sleeps for ten minutes: the wait ended on its timeout.
    timed = await terminals.text("terminal_read", terminal_id="t2", wait="exit", timeout_ms=300)
    assert "[wait: timeout after 300 ms]" in timed


async def test_a_cancel_ends_a_wait_promptly(terminals: Terminals) -> None:
    await terminals.text("terminal_open", command="sleep 600")
    stop = asyncio.Event()
    definition = terminals.root.get(TOOLS).get("terminal_read")
    assert definition is not None
    arguments = definition.arguments.model_validate(
        {"terminal_id": "t1", "wait": "exit", "timeout_ms": HANG_MS}
    )
    task = asyncio.ensure_future(definition.execute(arguments, terminals.context(signal=stop)))
    await asyncio.sleep(0.2)
    stop.set()
    # Neither the program's exit nor the wait's timeout (the hang guard) ended it.
    result = await task
    assert "[wait: cancelled]" in str(getattr(result, "content", result))


async def test_close_ends_a_tree_that_ignores_hangups(terminals: Terminals) -> None:
    output = await terminals.call(
        "terminal_open", command='trap "" HUP TERM; sleep 100 & echo child=$!; wait'
    )
    text = str(output.content)
    if "child=" not in text:
        text = await terminals.until("t1", r"child=\d+")
    child = int(re.findall(r"child=(\d+)", text)[-1])
    assert alive(child)
    listed = await terminals.text("terminal_list")
    assert listed.startswith("t1 ")
    closed = await terminals.text("terminal_close", terminal_id="t1")
    assert closed.startswith("closed t1")
    assert await gone(child)
    assert await terminals.text("terminal_list") == "(no terminals)"


async def test_terminals_belong_to_their_session(terminals: Terminals) -> None:
    await terminals.text("terminal_open", command="sleep 30")
    with pytest.raises(ToolError) as caught:
        await terminals.call("terminal_read", session="other", terminal_id="t1", wait="none")
    assert caught.value.code == "TERMINAL_NOT_FOUND"

    class Agent:
        id = "s1"

    pid = terminals.root.get(TERMINALS).of("s1")[0].pid
    terminals.root.emit(AGENT_DISPOSED, Agent())
    assert await gone(pid)


async def test_errors_are_clear(terminals: Terminals) -> None:
    await terminals.fails("terminal_read", "TERMINAL_NOT_FOUND", terminal_id="t9", wait="none")
    await terminals.fails("terminal_open", "TERMINAL_BAD_CWD", cwd="no/such/dir")
    await terminals.text("terminal_open", command="sleep 30")
    message = await terminals.fails(
        "terminal_send", "TERMINAL_BAD_KEY", terminal_id="t1", keys=["Hyper"]
    )
    assert "C-a" in message
    missing = await terminals.text("terminal_open", command="no-such-program-here")
    assert "command not found" in missing + await terminals.text(
        "terminal_read", terminal_id="t2", wait="exit", timeout_ms=HANG_MS
    )


async def test_too_many_terminals(tmp_path: Path) -> None:
    root = Context(name="test")
    root.provide(TOOLS, ToolService(root))
    await PluginHost(root).load(
        [Candidate("terminal", "test", plugin=terminal_plugin)],
        configs={"terminal": {"max_terminals": 1}},
    )
    try:
        terminals = Terminals(root, tmp_path)
        await terminals.text("terminal_open", command="sleep 30")
        await terminals.fails("terminal_open", "TERMINAL_LIMIT", command="sleep 30")
    finally:
        await root.dispose()
