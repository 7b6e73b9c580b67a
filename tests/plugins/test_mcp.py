"""The mcp plugin against real MCP servers over stdio: the SDK-built fixture in
tests/fixtures/mcp/server.py and the reference server (server-everything, from npm).
Broken servers, HTTP and project trust have modules of their own
(test_mcp_broken_servers, test_mcp_http, test_mcp_trust).

Every wait is bounded by HANG_S (a hang guard, never a timing assertion).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from dsh.policy.permissions import assess
from dsh.runtime import Runtime
from dsh.services import COMMANDS
from dsh_plugins._shared.images import prepare
from dsh_plugins.mcp import MCP
from tests.plugins.mcp_support import (
    FIXTURE,
    call,
    context,
    service_of,
    started,
    stdio_table,
    toml_string,
    tools_of,
    until,
)
from tests.support.waits import HANG_S

NODE_SERVERS = Path(__file__).resolve().parent.parent / "fixtures" / "node"


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
