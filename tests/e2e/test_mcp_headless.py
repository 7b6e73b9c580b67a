"""``dsh -p`` with MCP servers: the real binary, the SDK-built fixture server over
stdio, the scripted model calling its tool; and a hostile project whose servers
must never start."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from dsh.session import check_log
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import SETTINGS, Dsh, of_type, text_of

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"


def server_table(name: str, *args: str) -> str:
    listed = ", ".join(json.dumps(a) for a in args)
    return f"[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = [{listed}]\n"


async def test_the_model_calls_an_mcp_tool_and_reads_its_result(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS
        + server_table("fixture", str(FIXTURE), "stdio")
        + server_table("broken", "-c", "import sys; sys.stderr.write('no config'); sys.exit(2)")
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__fixture__echo", arguments='{"text": "hi"}')]),
        Reply(text="The server said hi."),
    )
    done = await dsh.run("-p", "ask the server about @fixture:notes://today")
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "The server said hi.\n"
    # The first request already offered the server's tools: dsh -p waited for it.
    first = fake_llm.chat_requests[0].body
    offered = sorted(t["function"]["name"] for t in first["tools"])
    assert "mcp__fixture__echo" in offered
    assert not any(name.startswith("mcp__broken__") for name in offered)
    answer = [
        text_of(m) for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert answer == ["echo: hi"]
    # The mentioned resource went in before the prompt, not a "not found" note.
    sent = json.dumps(first["messages"])
    assert "buy milk" in sent
    assert "no such file" not in sent
    events = await dsh.checked_events()
    [result] = of_type(events, "tool/result")
    assert result.data.error is None
    # The broken server is reported, with its reason and stderr, and dsh went on.
    assert "mcp: broken failed" in done.stderr
    assert "no config" in done.stderr


async def test_a_hostile_projects_servers_never_start(dsh: Dsh, fake_llm: FakeLLM) -> None:
    marker_settings = dsh.root / "ran-from-settings"
    marker_json = dsh.root / "ran-from-mcp-json"
    (dsh.project / ".dsh").mkdir()
    (dsh.project / ".dsh" / "settings.toml").write_text(
        server_table("evil", "-c", f"open({str(marker_settings)!r}, 'w').write('ran')")
    )
    (dsh.project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "evil2": {
                        "command": sys.executable,
                        "args": ["-c", f"open({str(marker_json)!r}, 'w').write('ran')"],
                    }
                }
            }
        )
    )
    fake_llm.add(Reply(text="Nothing to see."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr[-3000:]
    assert not marker_settings.exists()
    assert not marker_json.exists()
    offered = [t["function"]["name"] for t in fake_llm.chat_requests[0].body.get("tools", [])]
    assert not any(name.startswith("mcp__") for name in offered)


async def test_dsh_p_mcp_shows_each_servers_state(dsh: Dsh) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS
        + server_table("fixture", str(FIXTURE), "stdio")
        + server_table("broken", "-c", "import sys; sys.stderr.write('no config'); sys.exit(2)")
    )
    done = await dsh.run("-p", "/mcp")
    assert done.code == 0, done.stderr[-3000:]
    shown = done.stdout + done.stderr
    assert "fixture: ready, 9 tools" in shown
    assert "broken: failed" in shown
    assert "stderr: no config" in shown


async def test_a_servers_prompt_is_a_slash_command(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS + server_table("fixture", str(FIXTURE), "stdio")
    )
    fake_llm.add(Reply(text="Reviewed."))
    done = await dsh.run("-p", "/mcp__fixture__review app.py error handling")
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "Reviewed.\n"
    [request] = fake_llm.chat_requests
    users = [text_of(m) for m in request.body["messages"] if m["role"] == "user"]
    assert "Please review app.py, looking at error handling." in users[-1]


async def test_dsh_mcp_add_list_get_remove(dsh: Dsh) -> None:
    added = await dsh.run("mcp", "add", "fixture", "--", sys.executable, str(FIXTURE), "stdio")
    assert added.code == 0, added.stderr
    assert "Added the MCP server fixture" in added.stdout
    settings = (dsh.home / "settings.toml").read_text()
    assert settings.startswith(SETTINGS)  # the rest of the file kept as it was
    assert "[mcp.servers.fixture]" in settings

    listed = await dsh.run("mcp", "list")
    assert listed.code == 0, listed.stderr
    assert listed.stdout.startswith("fixture: ready, 9 tools")
    got = await dsh.run("mcp", "get", "fixture")
    assert got.code == 0, got.stderr
    assert "  tool mcp__fixture__echo\n" in got.stdout
    assert "  prompt /mcp__fixture__review\n" in got.stdout
    as_json = await dsh.run("mcp", "list", "--json")
    [server] = json.loads(as_json.stdout)["servers"]
    assert (server["name"], server["state"]) == ("fixture", "ready")

    again = await dsh.run("mcp", "add", "fixture", "--url", "http://127.0.0.1:1/mcp")
    assert again.code == 1
    assert "already has a server named 'fixture'" in again.stderr
    removed = await dsh.run("mcp", "remove", "fixture")
    assert removed.code == 0, removed.stderr
    assert (dsh.home / "settings.toml").read_text().rstrip() == SETTINGS.rstrip()
    listed = await dsh.run("mcp", "list")
    assert listed.stdout.startswith("No MCP servers are configured")
    missing = await dsh.run("mcp", "get", "fixture")
    assert missing.code == 1
    assert "no server named 'fixture'" in missing.stderr


async def test_dsh_mcp_add_takes_its_options_after_the_name(dsh: Dsh) -> None:
    """The forms docs/mcp.md and ``--help`` show: options after NAME, the command
    after ``--`` (its own options included)."""
    added = await dsh.run(
        "mcp",
        "add",
        "docs",
        "--url",
        "https://mcp.example.com/mcp",
        "--header",
        "Authorization: Bearer ${TOKEN}",
        "--transport",
        "http",
    )
    assert added.code == 0, added.stderr
    settings = tomllib.loads((dsh.home / "settings.toml").read_text())
    assert settings["mcp"]["servers"]["docs"] == {
        "url": "https://mcp.example.com/mcp",
        "type": "http",
        "headers": {"Authorization": "Bearer ${TOKEN}"},
    }

    local = await dsh.run(
        "mcp",
        "add",
        "local",
        "--scope",
        "project",
        "--env",
        "LEVEL=2",
        "--",
        "./server",
        "-y",
        "--",
        "x",
    )
    assert local.code == 0, local.stderr
    project = tomllib.loads((dsh.project / ".dsh" / "settings.toml").read_text())
    assert project["mcp"]["servers"]["local"] == {
        "command": "./server",
        "args": ["-y", "--", "x"],
        "env": {"LEVEL": "2"},
    }
    assert "local" not in tomllib.loads((dsh.home / "settings.toml").read_text())["mcp"]["servers"]

    before = (dsh.home / "settings.toml").read_text()
    bare = await dsh.run("mcp", "add", "bare", "./server")
    assert bare.code == 2
    assert "unrecognized arguments: ./server" in bare.stderr
    assert (dsh.home / "settings.toml").read_text() == before


async def test_dsh_mcp_alone_says_its_actions(dsh: Dsh) -> None:
    alone = await dsh.run("mcp")
    assert alone.code == 2
    assert "terminal" not in alone.stderr
    assert "usage: dsh mcp" in alone.stderr
    assert "add" in alone.stderr


async def test_a_killed_dsh_takes_its_servers_with_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    import asyncio
    import os
    import signal

    from tests.plugins.bash_support import eventually, process_running, running_with

    pid_file = dsh.project / "server.pid"  # where the sandbox lets the server write
    # The session's replay starts the server too, for its tools, in a sandbox whose
    # workspace is the replay's scratch folder: there the pid file is refused, and the
    # server serves all the same.
    script = (
        "import os,sys,runpy\n"
        "try: open(sys.argv[1],'w').write(str(os.getpid()))\n"
        "except OSError: pass\n"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    (dsh.home / "settings.toml").write_text(
        SETTINGS + server_table("fixture", "-c", script, str(pid_file))
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__fixture__slow", arguments='{"steps": 0}')]),
        Reply(text="never reached"),
    )
    child = await dsh.start("-p", "wait on the server")
    await eventually(lambda: len(fake_llm.chat_requests) == 1 and pid_file.is_file())
    # Its own PID is its PID namespace's: found by its arguments out here.
    [server] = running_with(sys.executable, str(pid_file))
    os.kill(child.pid, signal.SIGKILL)
    await asyncio.wait_for(child.wait(), 60)
    await eventually(lambda: not process_running(server))


async def test_an_image_result_reaches_a_vision_model(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS + server_table("fixture", str(FIXTURE), "stdio")
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__fixture__picture", arguments="{}")]),
        Reply(text="A red box."),
    )
    done = await dsh.run("-p", "what does the server draw?")  # deepseek-flash: vision
    assert done.code == 0, done.stderr[-3000:]
    messages = fake_llm.chat_requests[-1].body["messages"]
    [tool] = [m for m in messages if m["role"] == "tool"]
    assert "a red box" in text_of(tool)
    assert "[image 1 (image/png): attached]" in text_of(tool)
    parts = [
        p
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "image_url"
    ]
    assert len(parts) == 1
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    # Stored with the session as any tool's image (the request rebuilder of
    # dsh.testing does not load images, so the log is checked, not rebuilt).
    events = await dsh.events()
    assert check_log(events) == []
    [attached] = of_type(events, "images/attached")
    assert attached.data.image.name == "fixture-picture-1"
