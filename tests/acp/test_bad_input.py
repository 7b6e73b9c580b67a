"""What ``dsh acp`` does with input no editor should send, and an editor that leaves:
a JSON-RPC error or a clean exit, only protocol on stdout, the session log intact."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh, close_stdin, finish


class Raw:
    """JSON-RPC lines written and read by hand."""

    def __init__(self, child: asyncio.subprocess.Process) -> None:
        self.child = child
        self.seen: list[dict[str, Any]] = []

    async def write(self, line: bytes) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write(line + b"\n")
        await self.child.stdin.drain()

    async def request(self, id_: int, method: str, params: Any) -> None:
        message = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
        await self.write(json.dumps(message).encode())

    async def reply(self, id_: int | None) -> dict[str, Any]:
        """The response with ``id_`` (notifications before it are kept in ``seen``);
        every line must be a JSON-RPC message."""
        assert self.child.stdout is not None
        while True:
            line = await asyncio.wait_for(self.child.stdout.readline(), TIMEOUT)
            assert line, "dsh acp closed stdout"
            message = json.loads(line)
            assert message["jsonrpc"] == "2.0"
            self.seen.append(message)
            if "method" not in message and message.get("id") == id_:
                return message


async def started(dsh: Dsh) -> Raw:
    raw = Raw(await dsh.start("acp"))
    await raw.request(0, "initialize", {"protocolVersion": 1})
    assert (await raw.reply(0))["result"]["protocolVersion"] == 1
    return raw


async def test_malformed_requests_get_errors_and_dsh_goes_on(dsh: Dsh) -> None:
    raw = await started(dsh)
    await raw.write(b"{this is not json")
    assert (await raw.reply(None))["error"]["code"] == -32700
    await raw.write(b"[1, 2]")
    assert (await raw.reply(None))["error"]["code"] == -32600
    await raw.request(1, "session/teleport", {})
    assert (await raw.reply(1))["error"]["code"] == -32601
    await raw.request(2, "session/new", {"mcpServers": []})  # no cwd
    assert (await raw.reply(2))["error"]["code"] == -32602
    await raw.request(3, "session/new", {"cwd": "relative/path", "mcpServers": []})
    assert (await raw.reply(3))["error"]["code"] == -32602
    prompt = {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "hi"}]}
    await raw.request(4, "session/prompt", prompt)
    assert (await raw.reply(4))["error"]["code"] == -32602
    load = {"sessionId": "0" * 32, "cwd": str(dsh.project), "mcpServers": []}
    await raw.request(5, "session/load", load)
    assert (await raw.reply(5))["error"]["code"] == -32602
    await raw.request(6, "authenticate", {"methodId": "password"})
    assert (await raw.reply(6))["error"]["code"] == -32602
    # After all that, a sound request is answered.
    await raw.request(7, "session/new", {"cwd": str(dsh.project), "mcpServers": []})
    assert (await raw.reply(7))["result"]["sessionId"]
    await close_stdin(raw.child)
    done = await finish(raw.child, None)
    assert done.code == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    for line in done.stdout.splitlines():  # what came after the last reply read
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert await dsh.session_ids() == []  # nothing was said: nothing stored


async def test_authenticate_says_whether_a_key_is_configured(dsh: Dsh) -> None:
    raw = await started(dsh)
    await raw.request(1, "authenticate", {"methodId": "dsh-api-key"})
    assert (await raw.reply(1))["result"] == {}
    await close_stdin(raw.child)
    assert (await finish(raw.child, None)).code == 0
    dsh.key = None  # no key anywhere: the editor is told to authenticate
    raw = await started(dsh)
    await raw.request(1, "authenticate", {"methodId": "dsh-api-key"})
    error = (await raw.reply(1))["error"]
    assert error["code"] == -32000
    await close_stdin(raw.child)
    assert (await finish(raw.child, None)).code == 0
    files = list((dsh.home / "logs").glob("acp-*.log"))
    logs = "".join(p.read_text() for p in files)
    assert "dsh acp started" in logs
    assert (dsh.home / "logs").stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in files)  # the user's alone
    assert "sk-test" not in logs


async def test_an_editor_that_leaves_mid_turn_leaves_a_sound_session(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="word " * 400, chunk_size=5, chunk_delay_ms=20))
    raw = await started(dsh)
    await raw.request(1, "session/new", {"cwd": str(dsh.project), "mcpServers": []})
    session_id = (await raw.reply(1))["result"]["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "talk"}]}
    await raw.request(2, "session/prompt", prompt)
    while not any(
        m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
        for m in raw.seen
    ):
        await _one(raw)
    await close_stdin(raw.child)  # the editor is gone
    done = await finish(raw.child, None)
    assert done.code == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    events = await dsh.checked_events(session_id)
    [end] = [e for e in events if e.type == "turn/end"]
    assert end.data.reason.kind == "aborted"


async def _one(raw: Raw) -> None:
    assert raw.child.stdout is not None
    line = await asyncio.wait_for(raw.child.stdout.readline(), TIMEOUT)
    assert line
    raw.seen.append(json.loads(line))


async def test_a_signal_mid_turn_leaves_a_sound_session(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="word " * 400, chunk_size=5, chunk_delay_ms=20))
    raw = await started(dsh)
    await raw.request(1, "session/new", {"cwd": str(dsh.project), "mcpServers": []})
    session_id = (await raw.reply(1))["result"]["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "talk"}]}
    await raw.request(2, "session/prompt", prompt)
    while not any(
        m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
        for m in raw.seen
    ):
        await _one(raw)
    raw.child.terminate()  # as an editor closing may end its agent
    done = await finish(raw.child, None)
    assert done.code == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    events = await dsh.checked_events(session_id)
    [end] = [e for e in events if e.type == "turn/end"]
    assert end.data.reason.kind == "aborted"


async def test_nothing_but_protocol_reaches_stdout(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "settings.toml").write_text(
        '[plugins]\nmodules = ["tests.acp.noisy_plugin"]\ndisabled = ["title"]\n'
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="chatter", arguments="{}")]), Reply(text="Done.")
    )
    raw = await started(dsh)
    await raw.request(1, "session/new", {"cwd": str(dsh.project), "mcpServers": []})
    session_id = (await raw.reply(1))["result"]["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "chatter"}]}
    await raw.request(2, "session/prompt", prompt)  # every line read must be JSON-RPC
    assert (await raw.reply(2))["result"]["stopReason"] == "end_turn"
    await close_stdin(raw.child)
    done = await finish(raw.child, None)
    assert done.code == 0, done.stderr[-3000:]
    assert "stray" not in done.stdout
    assert "a child on stdout" not in done.stdout
    assert "stray print from a tool" in done.stderr  # it went somewhere a person can see
    tool = [
        m["content"] for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert tool == ["chattered"]
