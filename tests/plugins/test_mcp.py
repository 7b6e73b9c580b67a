"""The mcp plugin against real MCP servers: the SDK-built fixture in
tests/fixtures/mcp/server.py over stdio and Streamable HTTP on 127.0.0.1, and small
broken servers (one that exits, one that never answers, one that prints to stdout).

Every wait is bounded by HANG_S (a hang guard, never a timing assertion).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import ClassVar

import pytest
import pytest_asyncio

from dsh.control_chars import visible
from dsh.llm import CallId, ToolCallBlock, joined_text
from dsh.policy.permissions import assess
from dsh.runtime import Runtime, start_runtime
from dsh.services import COMMANDS, TOOLS
from dsh.tools import ToolContext, ToolService
from dsh_plugins._shared.images import prepare
from dsh_plugins.mcp import MCP, McpService
from dsh_plugins.mcp.service import status_lines
from tests.plugins.bash_support import eventually, process_running, running_with
from tests.support.waits import HANG_S

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"
NODE_SERVERS = Path(__file__).resolve().parent.parent / "fixtures" / "node"
PY = sys.executable


def server_pid(token: Path) -> int:
    """The PID of the one fixture server started with ``token`` among its arguments."""
    [pid] = running_with(PY, str(token))
    return pid


def toml_string(text: str) -> str:
    return json.dumps(text)


def stdio_table(name: str, *args: str, extra: str = "") -> str:
    listed = ", ".join(toml_string(a) for a in args)
    return f"[mcp.servers.{name}]\ncommand = {toml_string(PY)}\nargs = [{listed}]\n{extra}\n"


async def started(root: Path, settings: str, *, trust: bool | None = None) -> Runtime:
    home, project = root / "home", root / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    (home / "settings.toml").write_text(settings)
    if trust is None:
        return await start_runtime(home=home, cwd=project)
    from dsh.settings import load_settings

    return await start_runtime(
        home=home, cwd=project, settings=load_settings(home, project, trust=trust)
    )


@pytest_asyncio.fixture
async def fixture_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    record = tmp_path / "project" / "record.txt"  # the sandbox lets the server write there
    runtime = await started(
        tmp_path, stdio_table("fixture", str(FIXTURE), "stdio", "--record", str(record))
    )
    try:
        await asyncio.wait_for(runtime.root.get(MCP).settled(), HANG_S)
        yield runtime
    finally:
        await runtime.aclose()


def service_of(runtime: Runtime) -> McpService:
    return runtime.root.get(MCP)


def tools_of(runtime: Runtime) -> ToolService:
    return runtime.root.get(TOOLS).service


def context(
    tmp_path: Path, progress: list[str] | None = None, signal: asyncio.Event | None = None
) -> ToolContext:
    return ToolContext(
        call_id=CallId("call-1"),
        agent=None,
        cwd=tmp_path,
        signal=signal or asyncio.Event(),
        progress=(progress.append if progress is not None else lambda _: None),
    )


async def call(
    runtime: Runtime, tmp_path: Path, name: str, arguments: dict[str, object], **kwargs: object
) -> tuple[str, str | None]:
    block = ToolCallBlock(id=CallId("call-1"), name=name, arguments=json.dumps(arguments))
    outcome = await tools_of(runtime).run(block, context(tmp_path, **kwargs), None)  # type: ignore[arg-type]
    return joined_text(outcome.message.result.content), outcome.error_code


async def until(predicate: Callable[[], object], what: str) -> None:
    try:
        await eventually(lambda: bool(predicate()))
    except AssertionError:
        pytest.fail(f"hung waiting for {what}")


# ---------------------------------------------------------------------- stdio


async def test_a_stdio_servers_tools_are_dsh_tools(fixture_runtime: Runtime) -> None:
    [status] = service_of(fixture_runtime).statuses()
    assert status.state == "ready", status
    session = service_of(fixture_runtime).connections["fixture"].session
    assert session is not None
    assert session.protocol_version == "2026-07-28"  # the newest both speak
    names = sorted(n for n in tools_of(fixture_runtime).visible(None) if n.startswith("mcp__"))
    assert names == [
        "mcp__fixture__add",
        "mcp__fixture__document",
        "mcp__fixture__echo",
        "mcp__fixture__grow",
        "mcp__fixture__picture",
        "mcp__fixture__publish",
        "mcp__fixture__read_file_with_spaces",  # "read.file with spaces", made safe
        "mcp__fixture__slow",
        "mcp__fixture__wipe",
    ]
    schema = tools_of(fixture_runtime).get("mcp__fixture__add")
    assert schema is not None
    assert schema.schema.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }


async def test_a_servers_prompts_are_commands(fixture_runtime: Runtime) -> None:
    from dsh.services import COMMANDS

    command = fixture_runtime.root.get(COMMANDS).service.get("mcp__fixture__review")
    assert command is not None
    assert (command.description, command.arguments) == ("Review a file.", "path [focus]")
    [connection] = service_of(fixture_runtime).connections.values()
    text = await connection.prompts["mcp__fixture__review"].text("x.py speed")
    assert text == "Please review x.py, looking at speed."


async def test_results_text_structured_and_embedded_resources(
    fixture_runtime: Runtime, tmp_path: Path
) -> None:
    text, code = await call(fixture_runtime, tmp_path, "mcp__fixture__echo", {"text": "hi"})
    assert (text, code) == ("echo: hi", None)
    text, _ = await call(fixture_runtime, tmp_path, "mcp__fixture__add", {"a": 2, "b": 3})
    assert json.loads(text) == {"total": 5}
    text, _ = await call(fixture_runtime, tmp_path, "mcp__fixture__document", {})
    assert text == "see the attached notes\n\n[resource file:///notes.txt (text/plain)]\nthe notes"


async def test_an_image_without_an_agent_is_named_not_sent(
    fixture_runtime: Runtime, tmp_path: Path
) -> None:
    text, code = await call(fixture_runtime, tmp_path, "mcp__fixture__picture", {})
    assert code is None
    assert text.startswith("a red box\n\n[image (image/png, ")
    assert text.endswith("bytes): not shown to the model]")


async def test_a_servers_error_reaches_the_model_as_an_error(
    fixture_runtime: Runtime, tmp_path: Path
) -> None:
    text, code = await call(fixture_runtime, tmp_path, "mcp__fixture__add", {"a": "x"})
    assert code == "TOOL_ERROR"
    assert "validation error" in text.lower() or "error" in text.lower()


async def test_progress_reaches_the_tool_context(fixture_runtime: Runtime, tmp_path: Path) -> None:
    progress: list[str] = []
    text, _ = await call(
        fixture_runtime, tmp_path, "mcp__fixture__slow", {"steps": 2}, progress=progress
    )
    assert text == "done after 2 steps"
    assert progress == ["step 1 (1/2)", "step 2 (2/2)"]


async def test_a_cancelled_turn_cancels_the_call_on_the_server(
    fixture_runtime: Runtime, tmp_path: Path
) -> None:
    progress: list[str] = []
    signal = asyncio.Event()
    running = asyncio.create_task(
        call(
            fixture_runtime,
            tmp_path,
            "mcp__fixture__slow",
            {"steps": 0},
            progress=progress,
            signal=signal,
        )
    )
    await until(lambda: progress, "the slow tool to start")
    signal.set()  # Esc
    _, code = await asyncio.wait_for(running, HANG_S)
    assert code == "TOOL_CANCELLED"
    record = tmp_path / "project" / "record.txt"
    await until(
        lambda: record.is_file() and "slow cancelled" in record.read_text(),
        "the server to see notifications/cancelled",
    )


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_list_changes_refresh_tools_prompts_and_resources(tmp_path: Path, era: str) -> None:
    """Over the 2026-07-28 protocol the changes come on a subscriptions/listen
    stream; from a server of the initialize era, as notifications."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    server = FIXTURE if era != "legacy" else FIXTURE.with_name("legacy.py")
    args = [str(server), "stdio"]
    runtime = await started(tmp_path, stdio_table("fixture", *args))
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        connection = service_of(runtime).connections["fixture"]
        assert connection.session is not None
        version = connection.session.protocol_version
        assert version == era if era != "legacy" else version in HANDSHAKE_PROTOCOL_VERSIONS
        await until(lambda: connection.resources, "the resources to be listed")
        assert [str(r.uri) for r in connection.resources] == ["notes://today"]
        assert tools_of(runtime).get("mcp__fixture__extra") is None

        text, _ = await call(runtime, tmp_path, "mcp__fixture__grow", {})
        assert text == "grew"
        await until(
            lambda: tools_of(runtime).get("mcp__fixture__extra") is not None,
            "the new tool after list_changed",
        )
        text, _ = await call(runtime, tmp_path, "mcp__fixture__extra", {})
        assert text == "extra ran"

        text, _ = await call(runtime, tmp_path, "mcp__fixture__publish", {})
        assert text == "published"
        commands = runtime.root.get(COMMANDS).service
        await until(lambda: commands.get("mcp__fixture__summary"), "the new prompt's command")
        assert commands.get("mcp__fixture__review") is not None  # the old one is still there
        await until(lambda: len(connection.resources) == 2, "the new resource")
        uris = sorted(str(r.uri) for r in connection.resources)
        assert uris == ["notes://today", "notes://tomorrow"]
    finally:
        await runtime.aclose()


async def test_the_at_menu_offers_servers_then_their_resources(
    fixture_runtime: Runtime, tmp_path: Path
) -> None:
    from dsh.hooks import PROMPT_MENTIONS

    connection = service_of(fixture_runtime).connections["fixture"]
    await until(lambda: connection.resources, "the resources to be listed")
    agent = await fixture_runtime.agents.create(tmp_path)

    async def offered(query: str) -> list[tuple[str, str, bool]]:
        lists = await fixture_runtime.root.parallel(PROMPT_MENTIONS, agent, query)
        return [(c.insert, c.label, c.more) for choices in lists for c in choices]

    assert await offered("fix") == [("@fixture:", "fixture:", True)]
    assert await offered("") == [("@fixture:", "fixture:", True)]
    assert await offered("other") == []
    assert await offered("fixture:") == [("@fixture:notes://today", "fixture:notes://today", False)]
    assert await offered("fixture:TODAY") == [
        ("@fixture:notes://today", "fixture:notes://today", False)
    ]
    assert await offered("fixture:nothing") == []
    assert await offered("nobody:x") == []


async def test_a_resource_mention_attaches_the_resource(fixture_runtime: Runtime) -> None:
    from dsh_plugins.mcp.resources import attach

    connections = service_of(fixture_runtime).connections
    [message] = await attach("look at @fixture:notes://today, please", connections)
    text = message.text()
    assert "@fixture:notes://today" in text
    assert '<resource uri="notes://today" (text/plain)>\nbuy milk\n</resource>' in text
    [note] = await attach("and @fixture:notes://nothing", connections)
    assert "@fixture:notes://nothing:" in note.text()
    assert await attach("@nobody:notes://today @fixture", connections) == ()


async def test_annotations_decide_the_risk(fixture_runtime: Runtime, tmp_path: Path) -> None:
    tools = tools_of(fixture_runtime)
    ctx = context(tmp_path)
    echo, wipe, grow = (tools.get(f"mcp__fixture__{n}") for n in ("echo", "wipe", "grow"))
    assert echo is not None
    assert wipe is not None
    assert grow is not None
    args = echo.arguments.model_validate({"text": "x"})
    read = await echo.action(args, ctx)
    assert echo.read_only
    assert read.risk == "read"
    assert assess("default", echo, read, tmp_path).verdict == "allow"
    from dsh.policy.permissions import parse_rules

    allow_all = parse_rules("mcp__fixture__*")
    destructive = await wipe.action(wipe.arguments.model_validate({"target": "db"}), ctx)
    verdict = assess("default", wipe, destructive, tmp_path, allow=allow_all)
    assert verdict.verdict == "ask"  # an allow rule does not vouch for a destructive tool
    plain = await grow.action(grow.arguments.model_validate({}), ctx)
    assert assess("default", grow, plain, tmp_path).verdict == "ask"
    assert assess("default", grow, plain, tmp_path, allow=allow_all).verdict == "allow"
    deny = parse_rules("mcp__fixture__echo")
    assert assess("default", echo, read, tmp_path, deny=deny).verdict == "deny"


async def test_include_and_exclude_tools(tmp_path: Path) -> None:
    runtime = await started(
        tmp_path,
        stdio_table(
            "fixture",
            str(FIXTURE),
            "stdio",
            extra='include_tools = ["e*", "add", "wipe"]\nexclude_tools = ["wipe"]',
        ),
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.tools == ["mcp__fixture__add", "mcp__fixture__echo"]
    finally:
        await runtime.aclose()


async def test_env_references_are_resolved_and_not_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "s3cret-value-123")
    script = "import os,sys; sys.stderr.write('token=' + os.environ['TOKEN']); sys.exit(1)"
    runtime = await started(
        tmp_path,
        stdio_table("leaky", "-c", script, extra='env = { TOKEN = "${MCP_TEST_TOKEN}" }'),
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.state == "failed"
        assert "token=***" in status.stderr  # the child got it; the status hides it
        assert "s3cret" not in repr(status)
    finally:
        await runtime.aclose()


async def test_a_server_does_not_inherit_dshs_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-not-for-servers")
    script = (
        "import os,sys; sys.stderr.write(repr(os.environ.get('DEEPSEEK_API_KEY'))); sys.exit(1)"
    )
    runtime = await started(tmp_path, stdio_table("nosy", "-c", script))
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.stderr == "None"  # only PATH, HOME and the like, and its own env
    finally:
        await runtime.aclose()


async def test_a_missing_variable_fails_the_server_alone(tmp_path: Path) -> None:
    runtime = await started(
        tmp_path,
        stdio_table("needs", str(FIXTURE), "stdio", extra='env = { T = "${MCP_NOT_SET_ANYWHERE}" }')
        + stdio_table("fixture", str(FIXTURE), "stdio"),
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        states = {s.name: (s.state, s.reason) for s in service_of(runtime).statuses()}
        assert states["fixture"] == ("ready", None)
        assert states["needs"][0] == "failed"
        assert "${MCP_NOT_SET_ANYWHERE} is not set" in (states["needs"][1] or "")
    finally:
        await runtime.aclose()


# ---------------------------------------------------------------------- broken servers


async def test_broken_servers_leave_dsh_working(tmp_path: Path) -> None:
    settings = (
        stdio_table("exits", "-c", "import sys; sys.stderr.write('bad config'); sys.exit(3)")
        + stdio_table("mute", "-c", "import time; time.sleep(600)", extra="startup_timeout = 1")
        + stdio_table(
            "chatty", "-c", "import time; print('hello from a server', flush=True); time.sleep(600)"
        )
        + stdio_table("fixture", str(FIXTURE), "stdio")
        + '[mcp.servers.missing]\ncommand = "/no/such/program"\n'
    )
    runtime = await started(tmp_path, settings)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        states = {s.name: s for s in service_of(runtime).statuses()}
        assert states["fixture"].state == "ready"
        assert states["exits"].state == "failed"
        assert "exited" in (states["exits"].reason or "")
        assert states["exits"].stderr == "bad config"
        assert states["mute"].state == "failed"
        assert states["mute"].reason == "no answer to initialize within 1 s"
        assert states["chatty"].state == "failed"
        assert "not MCP" in (states["chatty"].reason or "")
        assert states["missing"].state == "failed"
        assert states["missing"].reason == "no program '/no/such/program' found"
        names = [n for n in tools_of(runtime).visible(None) if n.startswith("mcp__")]
        assert names
        assert all(n.startswith("mcp__fixture__") for n in names)
        text, _ = await call(runtime, tmp_path, "mcp__fixture__echo", {"text": "still here"})
        assert text == "echo: still here"
    finally:
        await runtime.aclose()


async def test_closing_dsh_ends_the_servers(tmp_path: Path) -> None:
    pid_file = tmp_path / "project" / "pid"
    script = (
        "import os,sys,runpy; open(sys.argv[1],'w').write(str(os.getpid()));"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    runtime = await started(tmp_path, stdio_table("fixture", "-c", script, str(pid_file)))
    await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
    assert service_of(runtime).statuses()[0].state == "ready"
    pid = server_pid(pid_file)
    await runtime.aclose()
    assert not process_running(pid)


async def test_a_server_that_dies_later_is_failed_and_can_be_restarted(tmp_path: Path) -> None:
    pid_file = tmp_path / "project" / "pid"
    script = (
        "import os,sys,runpy; open(sys.argv[1],'w').write(str(os.getpid()));"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    runtime = await started(
        tmp_path,
        stdio_table("fixture", "-c", script, str(pid_file), extra="reconnect_attempts = 0"),
    )
    try:
        service = service_of(runtime)
        await asyncio.wait_for(service.settled(), HANG_S)
        os.kill(server_pid(pid_file), signal.SIGKILL)
        await until(lambda: service.statuses()[0].state == "failed", "the crash to be seen")
        assert service.statuses()[0].reason == "the server closed the connection (it exited?)"
        assert tools_of(runtime).get("mcp__fixture__echo") is None
        assert any("fixture: failed" in line for line in status_lines(service))

        pid_file.unlink()
        old = service.connections["fixture"]
        assert service.restart("fixture")
        await until(lambda: service.statuses()[0].state == "ready", "the restart")
        assert old.ctx.disposed  # nothing of the old connection is left running
        text, _ = await call(runtime, tmp_path, "mcp__fixture__echo", {"text": "back"})
        assert text == "echo: back"
        assert not service.restart("no-such-server")
    finally:
        await runtime.aclose()


async def test_a_server_that_dies_later_comes_back_by_itself(tmp_path: Path) -> None:
    pid_file = tmp_path / "project" / "pid"
    script = (
        "import os,sys,runpy; open(sys.argv[1],'w').write(str(os.getpid()));"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    runtime = await started(tmp_path, stdio_table("fixture", "-c", script, str(pid_file)))
    try:
        service = service_of(runtime)
        await asyncio.wait_for(service.settled(), HANG_S)
        first = server_pid(pid_file)
        os.kill(first, signal.SIGKILL)

        def back() -> bool:
            return (
                running_with(PY, str(pid_file)) not in ([], [first])
                and service.statuses()[0].state == "ready"
                and tools_of(runtime).get("mcp__fixture__echo") is not None
            )

        await until(back, "the server to be started again")
        text, _ = await call(runtime, tmp_path, "mcp__fixture__echo", {"text": "again"})
        assert text == "echo: again"
    finally:
        await runtime.aclose()


def test_status_lines_show_server_text_safely() -> None:
    from dsh_plugins.mcp.status import Status

    class Fake:
        problems: ClassVar[list[str]] = ["settings.toml: mcp.servers.x: bad"]

        def statuses(self) -> list[Status]:
            return [
                Status("ok", "srv", "ready", tools=["mcp__ok__a", "mcp__ok__b"]),
                Status("bad", "srv2", "failed", reason="boom\x1b[31m", stderr="one\ntwo\x07"),
            ]

    lines = status_lines(Fake())  # type: ignore[arg-type]
    assert lines[0] == "settings.toml: mcp.servers.x: bad"
    assert lines[1] == "ok: ready, 2 tools (srv)"
    assert lines[2] == "bad: failed (srv2)"
    assert "\x1b" not in "".join(lines)
    assert "\x07" not in "".join(lines)
    assert lines[-2:] == ["  stderr: one", f"  stderr: two{visible(chr(7))}"]


# ---------------------------------------------------------------------- HTTP


@contextlib.asynccontextmanager
async def served(transport: str, path: str) -> AsyncIterator[str]:
    child = await asyncio.create_subprocess_exec(
        PY,
        str(FIXTURE),
        transport,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), HANG_S)
        port = int(line.decode().split()[1])
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        child.kill()
        await asyncio.wait_for(child.wait(), HANG_S)


@pytest_asyncio.fixture
async def http_server() -> AsyncIterator[str]:
    async with served("http", "/mcp") as url:
        yield url


async def test_a_legacy_sse_server(tmp_path: Path) -> None:
    async with served("sse", "/sse") as url:
        runtime = await started(tmp_path, f'[mcp.servers.old]\ntype = "sse"\nurl = "{url}"\n')
        try:
            await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
            [status] = service_of(runtime).statuses()
            assert status.state == "ready", status
            text, _ = await call(runtime, tmp_path, "mcp__old__echo", {"text": "over sse"})
            assert text == "echo: over sse"
        finally:
            await runtime.aclose()


async def test_a_streamable_http_server(tmp_path: Path, http_server: str) -> None:
    runtime = await started(
        tmp_path,
        f'[mcp.servers.remote]\nurl = "{http_server}"\nheaders = {{ X-Test = "yes" }}\n',
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.state == "ready", status
        text, _ = await call(runtime, tmp_path, "mcp__remote__echo", {"text": "over http"})
        assert text == "echo: over http"
        progress: list[str] = []
        text, _ = await call(
            runtime, tmp_path, "mcp__remote__slow", {"steps": 1}, progress=progress
        )
        assert (text, progress) == ("done after 1 steps", ["step 1 (1/1)"])
    finally:
        await runtime.aclose()


async def test_an_http_server_that_is_not_there(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    runtime = await started(
        tmp_path, f'[mcp.servers.gone]\nurl = "http://127.0.0.1:{port}/mcp"\nstartup_timeout = 20\n'
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.state == "failed"
        assert status.reason
    finally:
        await runtime.aclose()


# ---------------------------------------------------------------------- trust


def hostile_project(root: Path) -> tuple[Path, Path]:
    """A project whose .dsh/settings.toml and .mcp.json each start a program that
    writes a marker file."""
    project = root / "project"
    (project / ".dsh").mkdir(parents=True)
    marker_a, marker_b = project / "from-settings", project / "from-mcp-json"
    (project / ".dsh" / "settings.toml").write_text(
        stdio_table("evil", "-c", f"open({str(marker_a)!r}, 'w').write('ran')")
    )
    (project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "evil2": {
                        "command": PY,
                        "args": ["-c", f"open({str(marker_b)!r}, 'w').write('ran')"],
                    }
                }
            }
        )
    )
    return marker_a, marker_b


@pytest.mark.parametrize("trust", [None, False], ids=["undecided", "untrusted"])
async def test_an_untrusted_project_starts_no_server(tmp_path: Path, trust: bool | None) -> None:
    marker_a, marker_b = hostile_project(tmp_path)
    runtime = await started(tmp_path, "", trust=trust)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        assert service_of(runtime).connections == {}
        [problem] = service_of(runtime).problems
        assert problem.endswith(
            ".mcp.json not used: this folder is not trusted (`dsh trust` uses it)"
        )
    finally:
        await runtime.aclose()
    assert not marker_a.exists()
    assert not marker_b.exists()


async def test_a_trusted_project_starts_its_servers(tmp_path: Path) -> None:
    marker_a, marker_b = hostile_project(tmp_path)
    runtime = await started(tmp_path, "", trust=True)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        assert sorted(service_of(runtime).connections) == ["evil", "evil2"]
    finally:
        await runtime.aclose()
    assert marker_a.read_text() == "ran"
    assert marker_b.read_text() == "ran"


async def test_a_trusted_projects_mcp_json_others_can_write_is_refused(tmp_path: Path) -> None:
    _, marker = hostile_project(tmp_path)
    (tmp_path / "project" / ".dsh" / "settings.toml").unlink()
    (tmp_path / "project" / ".mcp.json").chmod(0o666)  # anyone could have written it
    runtime = await started(tmp_path, "", trust=True)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        assert service_of(runtime).connections == {}
        [problem] = service_of(runtime).problems
        assert "refused" in problem
        assert "can be written by other users" in problem
    finally:
        await runtime.aclose()
    assert not marker.exists()


async def test_a_project_with_only_mcp_json_uses_it_once_trusted(tmp_path: Path) -> None:
    from dsh.trust import TrustStore

    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"fixture": {"command": PY, "args": [str(FIXTURE), "stdio"]}}})
    )
    (tmp_path / "home").mkdir()
    TrustStore(tmp_path / "home").decide(project.resolve(), True)
    runtime = await started(tmp_path, "")
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert (status.name, status.state) == ("fixture", "ready")
    finally:
        await runtime.aclose()


async def test_a_bad_table_is_reported_not_raised(tmp_path: Path) -> None:
    runtime = await started(tmp_path, '[mcp.servers.x]\nargs = ["no command"]\n')
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [problem] = service_of(runtime).problems
        assert "settings.toml: mcp.servers.x" in problem
    finally:
        await runtime.aclose()


# ---------------------------------------------------------------------- reference server


async def test_the_reference_server_everything(tmp_path: Path) -> None:
    import shutil

    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not on this machine")
    # Installed by the README's test command (npm ci in tests/fixtures/node), so the
    # test itself never reaches the internet.
    program = NODE_SERVERS / "node_modules" / ".bin" / "mcp-server-everything"
    assert program.exists(), (
        f"{program} is missing: run `npm ci --prefix {NODE_SERVERS}` (the README's test "
        "command does)"
    )
    runtime = await started(
        tmp_path,
        f"[mcp.servers.everything]\ncommand = {toml_string(str(program))}\n"
        'args = ["stdio"]\n'
        "startup_timeout = 50\n",
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.state == "ready", status
        session = service_of(runtime).connections["everything"].session
        assert session is not None
        # This release predates 2026-07-28: server/discover failed, initialize worked.
        assert session.protocol_version == "2025-11-25"
        text, code = await call(runtime, tmp_path, "mcp__everything__echo", {"message": "hi"})
        assert code is None
        assert "hi" in text
        # Its tiny image has a text chunk with a wrong checksum, which viewers skip: a
        # model with vision gets it too, without that chunk.
        tiny = await session.call_tool("get-tiny-image", {})
        [image] = [block for block in tiny.content if block.type == "image"]
        prepared = prepare(base64.b64decode(image.data), "tiny")
        assert prepared.media_type == "image/png"
        assert (prepared.width, prepared.height) > (0, 0)
    finally:
        await runtime.aclose()
