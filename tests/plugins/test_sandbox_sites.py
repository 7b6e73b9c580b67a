"""The programs the model starts besides bash run inside the OS sandbox (issue 37):
terminals, MCP stdio servers and language servers, each with the real sandbox
service (bubblewrap), real programs and a home the sandbox can see
(tests/support/sandboxing.py).

Each checks both sides: what must keep working inside (a terminal's ``/dev/tty``,
``tty``, job control and size; a server's tools; a language server's answers), and
what must not happen (a write to ``~/.bashrc``, a read of ``~/.ssh/id_rsa`` or of
dsh's own ``/proc/PID/environ``). When the sandbox cannot start, none of them starts
unsandboxed: each says why.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from dsh.kernel import Candidate, Context, PluginHost
from dsh.runtime import Runtime, start_runtime
from dsh.sandbox import Sandbox
from dsh.services import SANDBOX, TOOLS
from dsh.settings import load_settings
from dsh.settings_tables import SandboxTable
from dsh.tools import ToolService
from dsh_plugins.mcp import MCP
from dsh_plugins.terminal import TERMINALS
from dsh_plugins.terminal import plugin as terminal_plugin
from tests.plugins.lsp_fixtures.harness import session as lsp_session
from tests.plugins.test_mcp import call
from tests.plugins.test_terminal import Terminals
from tests.support.sandboxing import SECRET_KEY, visible_home
from tests.support.waits import HANG_S

CANARY = "canary-5ec7e75a1d"
"""In this process's environment under a secret-looking name: a child's environment
never carries it, so only reading this process's ``/proc/PID/environ`` shows it."""
MISSING_BWRAP = "/nonexistent/bwrap"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with visible_home() as folder:
        monkeypatch.setenv("HOME", str(folder))
        monkeypatch.setenv("SANDBOX_TEST_TOKEN", CANARY)
        yield folder


async def terminals_in(root_folder: Path, table: SandboxTable) -> tuple[Terminals, Sandbox]:
    project = root_folder / "project"
    project.mkdir(exist_ok=True)
    root = Context(name="test")
    root.provide(TOOLS, ToolService(root))
    sandbox = Sandbox(table, table.policy, root=project, home=root_folder / "dsh-home")
    root.provide(SANDBOX, sandbox)
    root.effect(lambda: sandbox.aclose)
    await PluginHost(root).load([Candidate("terminal", "test", plugin=terminal_plugin)])
    return Terminals(root, project), sandbox


@pytest.fixture
async def inside(tmp_path: Path, home: Path) -> AsyncIterator[Terminals]:
    terminals, _ = await terminals_in(tmp_path, SandboxTable())
    try:
        yield terminals
    finally:
        await terminals.root.dispose()


# ---------------------------------------------------------------------- terminals


async def test_a_terminal_cannot_write_the_home_or_read_secrets_or_dsh(
    inside: Terminals, home: Path
) -> None:
    opened = await inside.text("terminal_open", rows=30, cols=100)
    await inside.until("t1", r"\$ ", seen=opened)
    text = await inside.text(
        "terminal_send",
        terminal_id="t1",
        text=(
            "echo pwned >> ~/.bashrc; echo bashrc=$?; cat ~/.ssh/id_rsa; "
            f"cat /proc/{os.getpid()}/environ; echo; echo checked"
        ),
        keys=["Enter"],
    )
    text = await inside.until("t1", r"checked\s", seen=text)
    assert "bashrc=1" in text
    assert not (home / ".bashrc").exists()
    assert "sandbox-test-secret-key" not in text
    assert CANARY not in text


async def test_inside_a_terminal_the_tty_job_control_and_size_work(inside: Terminals) -> None:
    async def typed(pattern: str, text: str = "", keys: tuple[str, ...] = ("Enter",)) -> str:
        sent = await inside.text("terminal_send", terminal_id="t1", text=text, keys=list(keys))
        return await inside.until("t1", pattern, seen=sent)

    opened = await inside.text("terminal_open", rows=30, cols=100)
    await inside.until("t1", r"\$ ", seen=opened)
    text = await typed(r"\n/dev/\S+", "echo via-dev-tty > /dev/tty; tty")
    assert "via-dev-tty" in text
    assert "not a tty" not in text
    await inside.showing("t1", "via-dev-tty")  # on the screen, as a person would see it
    await typed(r"30 100", "stty size")
    # Job control: a stopped job, then brought back and interrupted.
    await typed(r"sleep 600", "sleep 600")
    await typed(r"Stopped", keys=("C-z",))
    await typed(r"sleep 600", "fg")
    await inside.call("terminal_send", terminal_id="t1", keys=["C-c"])
    await typed(r"fg-done\s", "echo fg-done")
    # Where the shell is now is read from outside the sandbox's PID namespace.
    await typed(r"in-sub", "mkdir -p sub && cd sub && echo in-sub")
    terminal = inside.root.get(TERMINALS).get(inside.session, "t1")
    assert terminal.current_cwd() == inside.cwd / "sub"


async def test_a_terminal_does_not_open_when_the_sandbox_cannot_start(
    tmp_path: Path, home: Path
) -> None:
    terminals, _ = await terminals_in(tmp_path, SandboxTable(program=MISSING_BWRAP))
    try:
        message = await terminals.fails("terminal_open", "SANDBOX_UNAVAILABLE", command="true")
        assert "the sandbox cannot start" in message
        assert MISSING_BWRAP in message
        assert terminals.root.get(TERMINALS).of(terminals.session) == []
    finally:
        await terminals.root.dispose()


# ---------------------------------------------------------------------- MCP servers

PEEK_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("peek")

@server.tool()
def peek(path: str) -> str:
    try:
        with open(path) as file:
            return "read: " + file.read()
    except OSError as error:
        return f"refused: {error.strerror}"

server.run("stdio")
"""


def peek_table(name: str, extra: str = "") -> str:
    command, script = json.dumps(sys.executable), json.dumps(PEEK_SERVER)
    return f'[mcp.servers.{name}]\ncommand = {command}\nargs = ["-c", {script}]\n{extra}\n'


async def mcp_runtime(root: Path, settings: str, *, trust: bool = False) -> Runtime:
    dsh_home, project = root / "dsh-home", root / "project"
    dsh_home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    (dsh_home / "settings.toml").write_text(settings)
    loaded = load_settings(dsh_home, project, trust=trust)
    runtime = await start_runtime(home=dsh_home, cwd=project, settings=loaded)
    await asyncio.wait_for(runtime.root.get(MCP).settled(), HANG_S)
    return runtime


async def test_an_mcp_stdio_server_runs_inside_and_its_tools_work(
    tmp_path: Path, home: Path
) -> None:
    runtime = await mcp_runtime(tmp_path, peek_table("peek"))
    try:
        [status] = runtime.root.get(MCP).statuses()
        assert status.state == "ready", status
        (tmp_path / "project" / "notes.txt").write_text("project notes")
        notes = str(tmp_path / "project" / "notes.txt")
        text, code = await call(runtime, tmp_path, "mcp__peek__peek", {"path": notes})
        assert (text, code) == ("read: project notes", None)
        key = str(home / ".ssh" / "id_rsa")
        text, _ = await call(runtime, tmp_path, "mcp__peek__peek", {"path": key})
        assert "sandbox-test-secret-key" not in text
        text, _ = await call(
            runtime, tmp_path, "mcp__peek__peek", {"path": f"/proc/{os.getpid()}/environ"}
        )
        assert CANARY not in text
    finally:
        await runtime.aclose()


async def test_the_users_own_server_may_opt_out_a_projects_may_not(
    tmp_path: Path, home: Path
) -> None:
    project = tmp_path / "project"
    (project / ".dsh").mkdir(parents=True)
    (project / ".dsh" / "settings.toml").write_text(peek_table("theirs", "sandbox = false"))
    runtime = await mcp_runtime(tmp_path, peek_table("mine", "sandbox = false"), trust=True)
    try:
        states = {s.name: s.state for s in runtime.root.get(MCP).statuses()}
        assert states == {"mine": "ready", "theirs": "ready"}
        key = {"path": str(home / ".ssh" / "id_rsa")}
        mine, _ = await call(runtime, tmp_path, "mcp__mine__peek", key)
        assert mine == f"read: {SECRET_KEY}"  # the user's own choice: outside
        theirs, _ = await call(runtime, tmp_path, "mcp__theirs__peek", key)
        assert "sandbox-test-secret-key" not in theirs  # a project's: inside regardless
    finally:
        await runtime.aclose()


async def test_an_mcp_server_is_not_started_when_the_sandbox_cannot(
    tmp_path: Path, home: Path
) -> None:
    runtime = await mcp_runtime(
        tmp_path, f"[sandbox]\nprogram = {json.dumps(MISSING_BWRAP)}\n" + peek_table("peek")
    )
    try:
        [status] = runtime.root.get(MCP).statuses()
        assert status.state == "failed"
        assert status.reason is not None
        assert "the sandbox cannot start" in status.reason
        assert "mcp_servers = false" in status.reason  # and how to opt out
        assert status.tools == []
    finally:
        await runtime.aclose()


# ---------------------------------------------------------------------- language servers


async def test_the_language_server_runs_inside_and_answers(tmp_path: Path, home: Path) -> None:
    async with lsp_session(tmp_path, sandbox=SandboxTable()) as py:
        text = await py.lsp("definition", "pkg/app.py", line=8, character=21)
        assert text == "pkg/geometry.py:17:5  def area(circle: Circle) -> float:"
        broken = py.cwd / "pkg/broken.py"
        broken.write_text("import os\n\nlabel = missing\n")
        text = await py.lsp("diagnostics", "pkg/broken.py")
        assert "undefined name 'missing'" in text
        program = Path(f"/proc/{py.pid()}/cmdline").read_bytes().split(b"\0")[0]
        assert program.endswith(b"bwrap"), program  # what dsh started is the sandbox


async def test_a_language_server_is_not_started_when_the_sandbox_cannot(
    tmp_path: Path, home: Path
) -> None:
    async with lsp_session(tmp_path, sandbox=SandboxTable(program=MISSING_BWRAP)) as py:
        text = await py.fails(
            "lsp", "LSP_UNAVAILABLE", operation="diagnostics", file_path="pkg/app.py"
        )
        assert re.search(r"the sandbox cannot start .*/nonexistent/bwrap", text), text
        assert "language_servers = false" in text
        assert py.service.running() == []
