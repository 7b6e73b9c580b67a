"""The scripted model server, driven by a real HTTP client (httpx) over 127.0.0.1.

Its stream format, access, routes and connections, scripts and command line; its
faults and disconnects are in test_fake_llm_faults.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from dsh.testing import (
    FakeLLM,
    Fault,
    Reply,
    Script,
    ScriptError,
    ToolCallSpec,
    Usage,
    load_script,
)
from dsh.testing.fake_llm import main
from tests.support.waits import HANG_S
from tests.testing.fake_llm_support import CHAT, TIMEOUT, chat, chunks, deltas, payloads

ROOT = Path(__file__).resolve().parent.parent.parent


# --- the stream format ----------------------------------------------------------------


async def test_a_streamed_reply_has_deepseeks_exact_bytes(client: httpx.AsyncClient) -> None:
    async with FakeLLM([Reply(text="Hello, world", chunk_size=5)]) as server:
        response = await client.post(server.base_url + CHAT, json=chat())
        body = response.content

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["transfer-encoding"] == "chunked"
    first = json.loads(payloads(body)[0])
    completion_id, created, fingerprint = (
        first["id"],
        first["created"],
        first["system_fingerprint"],
    )
    uuid.UUID(completion_id)
    assert abs(created - time.time()) < 60
    assert re.fullmatch(r"fp_[0-9a-f]+", fingerprint)

    def event(delta: str, finish: str = "null") -> bytes:
        return (
            f'data: {{"id":"{completion_id}","object":"chat.completion.chunk",'
            f'"created":{created},"model":"deepseek-v4-flash",'
            f'"system_fingerprint":"{fingerprint}","choices":[{{"index":0,'
            f'"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]}}\n\n'
        ).encode()

    assert body == (
        event('{"role":"assistant","content":""}')
        + event('{"content":"Hello"}')
        + event('{"content":", wor"}')
        + event('{"content":"ld"}')
        + event('{"content":""}', '"stop"')
        + b"data: [DONE]\n\n"
    )


async def test_each_event_is_one_http_chunk_and_the_stream_ends_with_a_zero_chunk() -> None:
    async with FakeLLM([Reply(text="abcdef", chunk_size=3, keepalive=True)]) as server:
        body = json.dumps(chat()).encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            b"POST /chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )
        raw = await asyncio.wait_for(reader.read(), HANG_S)
        writer.close()
        await writer.wait_closed()

    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 200 OK",
        b"Content-Type: text/event-stream; charset=utf-8",
        b"Transfer-Encoding: chunked",
        b"Cache-Control: no-cache",
        b"Connection: close",
    ]
    pieces = []
    for _ in range(100):
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        pieces.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]
        if size == 0:
            break
    assert rest == b""
    assert pieces[0] == b": keep-alive\n\n"
    assert pieces[-1] == b""
    assert pieces[-2] == b"data: [DONE]\n\n"
    assert all(p.startswith(b"data: {") and p.endswith(b"}\n\n") for p in pieces[1:-2])
    assert [d.get("content") for d in deltas(b"".join(pieces))] == ["", "abc", "def", ""]


async def test_reasoning_text_and_two_tool_calls_reassemble(client: httpx.AsyncClient) -> None:
    reply = Reply(
        reasoning="Both files matter.",
        text="Reading them.",
        tool_calls=[
            ToolCallSpec(name="read", arguments={"path": "a.py"}, id="call_a"),
            ToolCallSpec(name="grep", arguments={"pattern": "def main", "path": "src/"}),
        ],
        chunk_size=3,
    )
    async with FakeLLM([reply]) as server:
        response = await client.post(server.base_url + CHAT, json=chat())
    all_chunks = chunks(response.content)
    found = [c["choices"][0]["delta"] for c in all_chunks]

    assert found[0] == {"role": "assistant", "content": None, "reasoning_content": ""}
    reasoning = [d for d in found[1:] if d.get("reasoning_content")]
    text = [d for d in found[1:] if d.get("content")]
    calls = [d for d in found if "tool_calls" in d]
    assert all(
        d == {"content": None, "reasoning_content": d["reasoning_content"]} for d in reasoning
    )
    assert all(d == {"content": d["content"], "reasoning_content": None} for d in text)
    assert "".join(d["reasoning_content"] for d in reasoning) == "Both files matter."
    assert "".join(d["content"] for d in text) == "Reading them."
    assert max(len(d["content"]) for d in text) == 3
    assert len(reasoning) + len(text) + len(calls) + 2 == len(found)

    assembled: dict[int, dict[str, str]] = {}
    for delta in calls:
        (call,) = delta["tool_calls"]
        if "id" in call:
            assert call["type"] == "function"
            assert call["function"]["arguments"] == ""
            assembled[call["index"]] = {
                "id": call["id"],
                "name": call["function"]["name"],
                "args": "",
            }
        else:
            assert set(call) == {"index", "function"}
            assert set(call["function"]) == {"arguments"}
            assembled[call["index"]]["args"] += call["function"]["arguments"]
    assert assembled[0] == {"id": "call_a", "name": "read", "args": '{"path": "a.py"}'}
    assert assembled[1]["name"] == "grep"
    assert re.fullmatch(r"call_01_[0-9a-f]{24}", assembled[1]["id"])
    assert json.loads(assembled[1]["args"]) == {"pattern": "def main", "path": "src/"}

    finishes = [c["choices"][0]["finish_reason"] for c in all_chunks]
    assert finishes == [None] * (len(all_chunks) - 1) + ["tool_calls"]
    assert found[-1] == {"content": "", "reasoning_content": None}


async def test_string_arguments_are_sent_verbatim(client: httpx.AsyncClient) -> None:
    call = ToolCallSpec(name="edit", arguments='{"path": "a.py", "ne')
    async with FakeLLM([Reply(tool_calls=[call], finish_reason="length")]) as server:
        response = await client.post(server.base_url + CHAT, json=chat())
    found = deltas(response.content)
    pieces = [d["tool_calls"][0]["function"]["arguments"] for d in found if "tool_calls" in d]
    assert "".join(pieces) == '{"path": "a.py", "ne'
    assert chunks(response.content)[-1]["choices"][0]["finish_reason"] == "length"


async def test_usage_rides_on_the_final_chunk_when_asked_for(client: httpx.AsyncClient) -> None:
    usage = Usage(prompt_tokens=100, completion_tokens=40, cache_hit_tokens=64, reasoning_tokens=25)
    async with FakeLLM([Reply(reasoning="hm", text="ok", usage=usage), Reply(text="ok")]) as server:
        asked = await client.post(server.base_url + CHAT, json=chat(include_usage=True))
        not_asked = await client.post(server.base_url + CHAT, json=chat())

    found = chunks(asked.content)
    assert [("usage" in c) for c in found] == [False] * (len(found) - 1) + [True]
    assert found[-1]["choices"][0]["finish_reason"] == "stop"
    assert found[-1]["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 40,
        "total_tokens": 140,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 25},
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 36,
    }
    assert not any("usage" in c for c in chunks(not_asked.content))


async def test_a_reply_without_usage_gets_an_estimate(client: httpx.AsyncClient) -> None:
    text = "x" * 400
    async with FakeLLM([Reply(text=text)]) as server:
        body = chat(include_usage=True, messages=[{"role": "user", "content": "y" * 4000}])
        response = await client.post(server.base_url + CHAT, json=body)
        raw = server.requests[0].raw
    usage = chunks(response.content)[-1]["usage"]
    assert usage["prompt_tokens"] == len(raw) // 4
    assert usage["completion_tokens"] == 100
    assert usage["prompt_cache_miss_tokens"] == usage["prompt_tokens"]
    assert "completion_tokens_details" not in usage


# --- access, routes, connections --------------------------------------------------------


async def test_a_required_key_refuses_others_without_using_a_reply(
    client: httpx.AsyncClient,
) -> None:
    script = Script(replies=[Reply(text="ok")], require_key="sk-secret")
    async with FakeLLM(script) as server:
        url = server.base_url + CHAT
        missing = await client.post(url, json=chat())
        wrong = await client.post(
            url, json=chat(), headers={"Authorization": "Bearer sk-guess1234"}
        )
        models = await client.get(server.base_url + "/models")
        assert server.remaining == 1
        right = await client.post(url, json=chat(), headers={"Authorization": "Bearer sk-secret"})
        assert server.remaining == 0

    for refused in (missing, wrong, models):
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "authentication_error"
    assert "****1234" in wrong.json()["error"]["message"]
    assert right.status_code == 200
    assert [r.status for r in server.requests] == [401, 401, 401, 200]
    assert [r.reply is not None for r in server.requests] == [False, False, False, True]


async def test_keep_alive_reuses_one_connection(client: httpx.AsyncClient) -> None:
    async with FakeLLM([Reply(text="one"), Reply(text="two"), Reply(text="three")]) as server:
        await client.post(server.base_url + CHAT, json=chat())
        await client.post(server.base_url + CHAT, json=chat(stream=False))
        async with httpx.AsyncClient(timeout=TIMEOUT) as other:
            await other.post(server.base_url + CHAT, json=chat())
    first, second, third = (r.connection for r in server.requests)
    assert first == second
    assert third != first
    assert all(r.status == 200 and r.finished_at is not None for r in server.requests)


async def test_requests_are_recorded(client: httpx.AsyncClient) -> None:
    reply = Reply(text="noted")
    async with FakeLLM([reply]) as server:
        before = time.monotonic()
        await client.post(
            server.base_url + "/chat/completions?trace=1",
            json=chat(),
            headers={"X-Trace-Id": "abc", "Authorization": "Bearer k"},
        )
        bad = await client.post(server.base_url + CHAT, content=b"{not json")
        after = time.monotonic()

    good, broken = server.requests
    assert good.method == "POST"
    assert good.path == "/chat/completions?trace=1"
    assert good.headers["x-trace-id"] == "abc"
    assert good.headers["authorization"] == "Bearer k"
    assert all(name == name.lower() for name in good.headers)
    assert good.body == chat()
    assert json.loads(good.raw) == chat()
    assert before <= good.arrived_at <= broken.arrived_at <= after
    assert good.reply is reply
    assert good.finished_at is not None
    assert good.finished_at >= good.arrived_at
    assert good.disconnected_at is None
    assert good.done.is_set()
    assert server.chat_requests == [good, broken]

    assert bad.status_code == 400
    assert broken.body is None
    assert broken.raw == b"{not json"
    assert broken.reply is None


async def test_pipelined_requests_are_answered_in_order() -> None:
    """The server reads ahead while answering (to notice a client leaving); bytes of a
    next request read that way must not be lost."""
    body = json.dumps(chat(stream=False)).encode()
    request = (
        b"POST /chat/completions HTTP/1.1\r\nHost: test\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    async with FakeLLM([Reply(text="first", chunk_delay_ms=20), Reply(text="second")]) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request + request.replace(b"Host: test", b"Host: test\r\nConnection: close"))
        raw = await asyncio.wait_for(reader.read(), HANG_S)
        writer.close()
        await writer.wait_closed()
    first, second = raw.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert b'"content":"first"' in first
    assert b'"content":"second"' in second
    assert [r.connection for r in server.requests] == [1, 1]


async def test_a_chunked_request_body_is_read(client: httpx.AsyncClient) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield json.dumps(chat(stream=False))[:10].encode()
        yield json.dumps(chat(stream=False))[10:].encode()

    async with FakeLLM([Reply(text="ok")]) as server:
        response = await client.post(server.base_url + CHAT, content=body())
    assert server.requests[0].headers["transfer-encoding"] == "chunked"
    assert server.requests[0].body == chat(stream=False)
    assert response.json()["choices"][0]["message"]["content"] == "ok"


async def test_an_exhausted_script_answers_500(client: httpx.AsyncClient) -> None:
    async with FakeLLM() as server:
        response = await client.post(server.base_url + CHAT, json=chat())
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "script_exhausted"
    assert "exhausted" in response.json()["error"]["message"]


async def test_after_last_answers_every_request_beyond_the_script(
    client: httpx.AsyncClient,
) -> None:
    script = Script(replies=[Reply(text="first")], after_last=Reply(text="no more"))
    async with FakeLLM(script) as server:
        answers = [
            (await client.post(server.base_url + CHAT, json=chat(stream=False))).json()
            for _ in range(3)
        ]
    texts = [a["choices"][0]["message"]["content"] for a in answers]
    assert texts == ["first", "no more", "no more"]


async def test_models_are_listed_with_or_without_v1(client: httpx.AsyncClient) -> None:
    async with FakeLLM() as default, FakeLLM(Script(models=["m-1"])) as custom:
        with_v1 = await client.get(default.base_url + "/v1/models")
        without = await client.get(default.base_url + "/models")
        listed = await client.get(custom.base_url + "/models")
        unknown = await client.get(custom.base_url + "/v1/embeddings")
        wrong_method = await client.get(custom.base_url + "/chat/completions")

    assert with_v1.json() == without.json()
    assert with_v1.json() == {
        "object": "list",
        "data": [
            {"id": "deepseek-flash", "object": "model", "owned_by": "deepseek"},
            {"id": "deepseek-v4-pro", "object": "model", "owned_by": "deepseek"},
        ],
    }
    assert [m["id"] for m in listed.json()["data"]] == ["m-1"]
    for missing in (unknown, wrong_method):
        assert missing.status_code == 404
        assert set(missing.json()["error"]) == {"message", "type", "param", "code"}


async def test_a_non_streaming_request_gets_one_completion(client: httpx.AsyncClient) -> None:
    reply = Reply(
        reasoning="Short.",
        text="Here.",
        tool_calls=[ToolCallSpec(name="read", arguments={"path": "a"}, id="call_x")],
        usage=Usage(prompt_tokens=7, completion_tokens=3),
        model="deepseek-v4-pro",
    )
    async with FakeLLM([reply]) as server:
        response = await client.post(server.base_url + CHAT, json=chat(stream=False))
    assert response.headers["content-type"] == "application/json"
    completion = response.json()
    uuid.UUID(completion["id"])
    assert completion["object"] == "chat.completion"
    assert completion["model"] == "deepseek-v4-pro"
    assert completion["choices"] == [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Here.",
                "reasoning_content": "Short.",
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a"}'},
                    }
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ]
    assert completion["usage"]["total_tokens"] == 10


# --- scripts ----------------------------------------------------------------------------


def test_scripts_validate_with_clear_errors(tmp_path: Path) -> None:
    assert Script.model_validate([{"text": "a"}]).replies == [Reply(text="a")]
    assert Reply(tool_calls=[ToolCallSpec(name="f")]).resolved_finish_reason == "tool_calls"
    assert Reply().resolved_finish_reason == "stop"

    with pytest.raises(ValidationError, match="chunk_sise"):
        Reply.model_validate({"chunk_sise": 3})
    with pytest.raises(ValidationError, match="chunk_size"):
        Reply(chunk_size=0)
    with pytest.raises(ValidationError, match="cache_hit_tokens cannot exceed"):
        Usage(prompt_tokens=1, completion_tokens=1, cache_hit_tokens=2)
    with pytest.raises(ValidationError, match="line break"):
        Fault(status=500, headers={"X-A": "b\r\nX-Injected: c"})

    bad = tmp_path / "bad.json"
    bad.write_text('{"replies": [{"text": 3}]}')
    with pytest.raises(ScriptError, match=r"bad\.json: not a valid script"):
        load_script(bad)
    bad.write_text("[")
    with pytest.raises(ScriptError, match="not JSON"):
        load_script(bad)


async def test_the_fixture_serves_added_replies(
    fake_llm: FakeLLM, client: httpx.AsyncClient
) -> None:
    fake_llm.add(Reply(text="from the fixture"), {"text": "as a dict"})
    assert fake_llm.remaining == 2
    first = await client.post(fake_llm.base_url + CHAT, json=chat(stream=False))
    second = await client.post(fake_llm.base_url + CHAT, json=chat(stream=False))
    assert first.json()["choices"][0]["message"]["content"] == "from the fixture"
    assert second.json()["choices"][0]["message"]["content"] == "as a dict"


# --- the command line ---------------------------------------------------------------------


async def test_the_cli_serves_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "from the CLI", "chunk_size": 100}]))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dsh.testing.fake_llm",
        "--script",
        str(script),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), HANG_S)
        match = re.fullmatch(rb"fake LLM listening on (http://127\.0\.0\.1:\d+)\n", line)
        assert match, line
        async with httpx.AsyncClient(base_url=match.group(1).decode(), timeout=TIMEOUT) as client:
            response = await client.post(CHAT, json=chat())
        process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), HANG_S)
    finally:
        if process.returncode is None:
            process.kill()
            await asyncio.wait_for(process.wait(), HANG_S)

    assert deltas(response.content)[1] == {"content": "from the CLI"}
    assert process.returncode == 0
    assert stderr.decode() == "POST /v1/chat/completions -> 200\n"


def test_the_cli_refuses_a_bad_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    assert main(["--script", str(missing)]) == 2
    assert "missing.json: cannot read the script" in capsys.readouterr().err
