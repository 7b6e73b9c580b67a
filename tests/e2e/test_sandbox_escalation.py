"""Escalation is a question, and the sandbox fails closed: through the real ``dsh``
binary against the scripted server, answering its approval requests over stream-json,
asserting the effects (files on disk, connections a server outside saw)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import SETTINGS, Dsh, close_stdin, finish, send, stream_events
from tests.support.sandboxing import Listener, listening

STREAM = ("-p", "--input-format", "stream-json", "--output-format", "stream-json")


@pytest.fixture
def listener() -> Iterator[Listener]:
    with listening() as server:
        yield server


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside the project and outside /tmp (which the sandbox replaces with a
    private one), so a write there meets the read-only filesystem."""
    folder = Path(tempfile.mkdtemp(prefix="dsh-escalation-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def bash(command: str, **escalate: Any) -> Reply:
    arguments: dict[str, Any] = {"command": command, "description": "a test command"}
    if escalate:
        arguments["escalate"] = escalate
    return Reply(tool_calls=[ToolCallSpec(name="bash", arguments=arguments)])


def tool_messages(server: FakeLLM) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


def curl(port: int) -> str:
    return f"curl -sS --max-time 5 http://127.0.0.1:{port}/"


async def converse(
    dsh: Dsh,
    answers: list[str],
    *args: str,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run one prompt over stream-json, answering each approval request with the next
    of ``answers``; the requests, in order. ``observe`` sees each request as it comes,
    before it is answered (to look at the world at that moment)."""
    child = await dsh.start(*STREAM, *args)
    await send(child, {"type": "prompt", "text": "go"})
    requests: list[dict[str, Any]] = []
    pending = list(answers)
    async for line in stream_events(child):
        if line.get("type") == "approval-request":
            requests.append(line)
            if observe is not None:
                observe(line)
            assert pending, f"asked more than expected: {line}"
            outcome = pending.pop(0)
            await send(
                child, {"type": "approval", "requestId": line["requestId"], "outcome": outcome}
            )
        if line.get("type") == "turn/end":
            break
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    assert pending == [], "some answers were never asked for"
    return requests


@pytest.fixture
def installation(dsh: Dsh) -> Dsh:
    dsh.home_of_its_own()
    return dsh


async def test_a_refused_write_says_why_and_an_approved_escalation_writes(
    installation: Dsh, fake_llm: FakeLLM, outside: Path
) -> None:
    target = outside / "made.txt"
    fake_llm.add(bash(f"echo hi > {target}"))
    fake_llm.add(bash(f"echo hi > {target}", write=[str(outside)], reason="save the report"))
    fake_llm.add(Reply(text="done"))
    # Bypass mode: the command alone is never asked; its escalation is.
    [request] = await converse(installation, ["allow_once"], "--permission-mode", "bypass")
    refused, written = tool_messages(fake_llm)
    assert "Read-only file system" in refused
    assert "[sandbox: a write was refused" in refused
    assert '"escalate"' in refused
    assert f"write {outside}" in request["reason"]
    assert "save the report" in request["reason"]
    assert target.read_text() == "hi\n"
    assert "[sandbox:" not in written


async def test_the_network_is_reached_only_through_an_approved_escalation(
    installation: Dsh, fake_llm: FakeLLM, listener: Listener
) -> None:
    fake_llm.add(bash(curl(listener.port)))
    fake_llm.add(bash(curl(listener.port), network=True, reason="call the test server"))
    fake_llm.add(bash(curl(listener.port), network=True, reason="call the test server"))
    fake_llm.add(Reply(text="done"))
    accepted: list[int] = []
    requests = await converse(
        installation,
        ["deny", "allow_once"],
        "--permission-mode",
        "bypass",
        observe=lambda _: accepted.append(listener.accepted),
    )
    assert len(requests) == 2
    assert all("use the network" in r["reason"] for r in requests)
    # When the second escalation was asked, neither the plain call nor the denied
    # escalation had reached the server.
    assert accepted == [0, 0]
    assert listener.reached(1) == 1
    plain, denied, reached = tool_messages(fake_llm)
    assert "Failed to connect" in plain
    assert "[sandbox: a connection was refused" in plain
    assert denied.startswith("Error: the user denied bash")
    assert "Failed to connect" not in reached


async def test_a_session_grant_names_the_program(
    installation: Dsh, fake_llm: FakeLLM, listener: Listener
) -> None:
    connect = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f'{listener.port}), timeout=5)"'
    )
    fake_llm.add(bash(curl(listener.port), network=True, reason="call the test server"))
    fake_llm.add(bash(curl(listener.port), network=True, reason="call it again"))
    fake_llm.add(bash(connect, network=True, reason="call it from python"))
    fake_llm.add(Reply(text="done"))
    requests = await converse(
        installation, ["allow_session", "deny"], "--permission-mode", "bypass"
    )
    first, python = requests
    assert first["grant"] == "sandbox(curl network)"
    assert "python3" in python["summary"]
    # curl reached the server twice (the second time unasked); python3 never did.
    assert listener.reached(2) == 2
    events = await installation.checked_events()
    [granted] = [
        e.data
        for e in events
        if e.type == "approval/resolved" and e.data.outcome == "allow-session"
    ]
    assert granted.pattern == "sandbox(curl network)"
    assert granted.mac


async def test_no_setting_pre_approves_an_escalation(
    installation: Dsh, fake_llm: FakeLLM, listener: Listener
) -> None:
    rules = '"bash", "bash(curl:*)", "sandbox", "sandbox(curl network)"'
    (installation.home / "settings.toml").write_text(
        f"{SETTINGS}\n[permissions]\nallow = [{rules}]\n"
    )
    dot_dsh = installation.project / ".dsh"
    dot_dsh.mkdir()
    (dot_dsh / "settings.toml").write_text(f'[permissions]\nmode = "bypass"\nallow = [{rules}]\n')
    fake_llm.add(bash(curl(listener.port), network=True, reason="call the test server"))
    fake_llm.add(Reply(text="done"))
    done = await installation.run("-p", "go", "--trust", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr
    [message] = tool_messages(fake_llm)
    assert "no one is here to approve it" in message
    assert "use the network" in message
    assert listener.accepted == 0


def broken_sandbox(dsh: Dsh) -> None:
    (dsh.home / "settings.toml").write_text(
        f'{SETTINGS}\n[sandbox]\nprogram = "/nonexistent/bwrap"\n'
        '[permissions]\nallow = ["bash(touch:*)"]\n'
    )


@pytest.mark.parametrize("mode", ["default", "bypass"])
async def test_when_the_sandbox_cannot_start_every_command_is_asked(
    installation: Dsh, fake_llm: FakeLLM, mode: str
) -> None:
    broken_sandbox(installation)
    fake_llm.add(bash("touch made.txt"))
    fake_llm.add(Reply(text="done"))
    [request] = await converse(installation, ["allow_once"], "--permission-mode", mode)
    assert request["reason"].startswith("the sandbox cannot start: [sandbox] program")
    assert request["reason"].endswith("this command would run unsandboxed")
    assert request.get("grant") is None
    assert (installation.project / "made.txt").exists()


async def test_when_the_sandbox_cannot_start_headless_denies(
    installation: Dsh, fake_llm: FakeLLM
) -> None:
    broken_sandbox(installation)
    fake_llm.add(bash("touch made.txt"))
    fake_llm.add(Reply(text="done"))
    done = await installation.run("-p", "go", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr
    [message] = tool_messages(fake_llm)
    assert "the sandbox cannot start" in message
    assert "this command would run unsandboxed" in message
    assert not (installation.project / "made.txt").exists()


async def test_sandbox_off_runs_as_before(installation: Dsh, fake_llm: FakeLLM) -> None:
    broken_sandbox(installation)
    fake_llm.add(bash("touch made.txt"))
    fake_llm.add(Reply(text="done"))
    done = await installation.run("-p", "go", "--permission-mode", "bypass", "--sandbox", "off")
    assert done.code == 0, done.stderr
    assert (installation.project / "made.txt").exists()
