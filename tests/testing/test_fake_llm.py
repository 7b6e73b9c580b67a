"""The scripted model server, driven by a real HTTP client (httpx) over 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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
    error_body,
    load_script,
)
from dsh.testing.fake_llm import main
from tests.support.waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent.parent
CHAT = "/v1/chat/completions"
TIMEOUT = httpx.Timeout(HANG_S)


def chat(stream: bool = True, include_usage: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        **extra,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    return body


def payloads(body: bytes) -> list[str]:
    """The ``data:`` payloads of an SSE body, comments skipped, framing checked."""
    assert body.endswith(b"\n\n"), body[-40:]
    found = []
    for frame in body[:-2].split(b"\n\n"):
        if frame.startswith(b":"):
            continue
        assert frame.startswith(b"data: "), frame
        assert b"\n" not in frame, frame
        found.append(frame[len(b"data: ") :].decode())
    return found


def chunks(body: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of a complete stream, which must end with [DONE]."""
    found = payloads(body)
    assert found[-1] == "[DONE]"
    return [json.loads(p) for p in found[:-1]]


def deltas(body: bytes) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks(body)]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as opened:
        yield opened


async def stream_until_error(
    client: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> tuple[httpx.Response, bytes, Exception | None]:
    """Read a stream as far as it goes; returns the response, its bytes and how it broke."""
    received = bytearray()
    async with client.stream("POST", url, json=body) as response:
        try:
            async for piece in response.aiter_bytes():
                received.extend(piece)
        except httpx.TransportError as error:
            return response, bytes(received), error
    return response, bytes(received), None


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


# --- faults ---------------------------------------------------------------------------


async def test_a_rate_limit_fault_sends_retry_after_and_deepseeks_error(
    client: httpx.AsyncClient,
) -> None:
    script = [
        Reply(fault=Fault(status=429, retry_after=2)),
        Reply(fault=Fault(status=429, retry_after=0.5)),
        Reply(text="after the wait"),
    ]
    async with FakeLLM(script) as server:
        first = await client.post(server.base_url + CHAT, json=chat())
        second = await client.post(server.base_url + CHAT, json=chat())
        third = await client.post(server.base_url + CHAT, json=chat())

    assert first.status_code == 429
    assert first.headers["retry-after"] == "2"
    assert second.headers["retry-after"] == "0.5"
    assert first.headers["content-type"] == "application/json"
    assert first.json() == error_body(429)
    assert set(first.json()["error"]) == {"message", "type", "param", "code"}
    assert "".join(d.get("content") or "" for d in deltas(third.content)) == "after the wait"


async def test_a_server_error_fault_can_send_any_body(client: httpx.AsyncClient) -> None:
    script = [
        Reply(fault=Fault(status=500)),
        Reply(
            fault=Fault(
                status=502, body="<html>Bad Gateway</html>", headers={"Content-Type": "text/html"}
            )
        ),
        Reply(fault=Fault(status=503, body={"detail": "busy"})),
    ]
    async with FakeLLM(script) as server:
        default = await client.post(server.base_url + CHAT, json=chat())
        html = await client.post(server.base_url + CHAT, json=chat())
        custom = await client.post(server.base_url + CHAT, json=chat())

    assert default.status_code == 500
    assert default.json()["error"]["type"] == "server_error"
    assert html.status_code == 502
    assert html.headers["content-type"] == "text/html"
    assert html.text == "<html>Bad Gateway</html>"
    assert custom.status_code == 503
    assert custom.json() == {"detail": "busy"}


async def test_a_cut_stream_ends_without_done(client: httpx.AsyncClient) -> None:
    async with FakeLLM([Reply(text="abcdefghijkl", chunk_size=2, cut_after=3)]) as server:
        response, body, error = await stream_until_error(client, server.base_url + CHAT, chat())
        record = server.requests[0]
        await asyncio.wait_for(record.done.wait(), HANG_S)

    assert response.status_code == 200
    assert isinstance(error, httpx.RemoteProtocolError)
    found = payloads(body)
    assert len(found) == 3
    assert "[DONE]" not in found
    assert record.status == 200
    assert record.finished_at is None
    assert record.disconnected_at is None


async def test_a_cut_after_every_event_still_leaves_out_the_last_chunk(
    client: httpx.AsyncClient,
) -> None:
    async with FakeLLM([Reply(text="ab", cut_after=99)]) as server:
        _, body, error = await stream_until_error(client, server.base_url + CHAT, chat())
    assert isinstance(error, httpx.RemoteProtocolError)
    assert payloads(body)[-1] == "[DONE]"


async def test_a_malformed_line_is_sent_as_the_given_event(client: httpx.AsyncClient) -> None:
    async with FakeLLM([Reply(text="abcd", chunk_size=2, malformed_at=2)]) as server:
        response = await client.post(server.base_url + CHAT, json=chat())
    found = payloads(response.content)
    assert found[2] == "{this is not json"
    assert b"\n\ndata: {this is not json\n\n" in response.content
    assert json.loads(found[1])["choices"][0]["delta"] == {"content": "ab"}
    assert json.loads(found[3])["choices"][0]["delta"] == {"content": "cd"}
    assert found[-1] == "[DONE]"


async def test_raw_events_are_sent_exactly_as_given(client: httpx.AsyncClient) -> None:
    """A recorded stream goes out as it came: three choices in one chunk, an empty
    ``choices``, no usage added and no ``[DONE]`` unless the script lists it."""
    recorded: list[dict[str, Any] | str] = [
        {"choices": [{"index": i, "delta": {"content": f"c{i}"}} for i in range(3)]},
        {"choices": []},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    async with FakeLLM([Reply(events=recorded), Reply(events=[*recorded, "[DONE]"])]) as server:
        first = await client.post(server.base_url + CHAT, json=chat(include_usage=True))
        second = await client.post(server.base_url + CHAT, json=chat(stream=False))
    assert first.headers["content-type"].startswith("text/event-stream")
    assert [json.loads(p) for p in payloads(first.content)] == recorded
    assert b'data: {"choices":[]}\n\n' in first.content
    assert payloads(second.content)[-1] == "[DONE]"
    assert [json.loads(p) for p in payloads(second.content)[:-1]] == recorded


def test_raw_events_cannot_go_with_rendered_fields() -> None:
    with pytest.raises(ValidationError, match="text cannot go with them"):
        Reply(events=[{"choices": []}], text="hi")
    assert Reply(events=[], cut_after=1).events == []


async def test_a_slow_first_byte_delays_the_headers(client: httpx.AsyncClient) -> None:
    script = [Reply(text="late", first_byte_delay_ms=600_000), Reply(text="now")]
    async with FakeLLM(script) as server, httpx.AsyncClient(timeout=TIMEOUT) as other:
        request = client.build_request("POST", server.base_url + CHAT, json=chat())
        waiting = asyncio.ensure_future(client.send(request, stream=True))
        deadline = time.monotonic() + HANG_S
        while not server.requests:  # the first reply is the one with the delay
            assert time.monotonic() < deadline, "the request never arrived"
            await asyncio.sleep(0.01)
        # A whole exchange on another connection, while the first waits for its first
        # byte: had its headers been sent, its client would have read them by now.
        answered = await other.post(server.base_url + CHAT, json=chat(stream=False))
        assert answered.json()["choices"][0]["message"]["content"] == "now"
        assert not waiting.done()
        waiting.cancel()
    # A delay that runs out: the headers, then the whole reply.
    async with (
        FakeLLM([Reply(text="late", first_byte_delay_ms=300)]) as server,
        client.stream("POST", server.base_url + CHAT, json=chat()) as response,
    ):
        body = await response.aread()
    assert response.status_code == 200
    assert "".join(d.get("content") or "" for d in deltas(body)) == "late"


async def read_for(response: httpx.Response, seconds: float) -> bytes:
    """What a stream sends within ``seconds`` (it may never end)."""
    received = bytearray()

    async def read() -> None:
        async for piece in response.aiter_bytes():
            received.extend(piece)

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), seconds)
    return bytes(received)


async def test_a_held_reply_sends_its_first_events_then_nothing_until_the_client_leaves(
    client: httpx.AsyncClient,
) -> None:
    # Events: 0 the role chunk, 1 "ab", 2 the final chunk, 3 [DONE].
    script = [
        Reply(text="ab", chunk_size=2, hold_after=0),
        Reply(text="ab", chunk_size=2, hold_after=3, keepalive_interval_ms=50),
        Reply(text="ab", chunk_size=2, hold_after=4),
    ]
    async with FakeLLM(script) as server:
        seen: list[bytes] = []
        for _ in script:
            async with client.stream("POST", server.base_url + CHAT, json=chat()) as response:
                assert response.status_code == 200
                seen.append(await read_for(response, 0.5))
        for record in server.requests:
            await asyncio.wait_for(record.done.wait(), HANG_S)

    headers_only, finished_then_pings, done_then_open = seen
    assert headers_only == b""
    sent = [json.loads(p) for p in payloads(finished_then_pings)]
    assert sent[-1]["choices"][0]["finish_reason"] == "stop"
    assert finished_then_pings.count(b": keep-alive\n\n") >= 2
    assert "[DONE]" not in payloads(finished_then_pings)
    assert payloads(done_then_open)[-1] == "[DONE]"
    assert all(r.finished_at is None and r.disconnected_at is not None for r in server.requests)


async def test_a_reply_waits_before_its_first_event_with_keep_alives(
    client: httpx.AsyncClient,
) -> None:
    reply = Reply(text="late", first_event_delay_ms=300, keepalive_interval_ms=50)
    async with (
        FakeLLM([reply]) as server,
        client.stream("POST", server.base_url + CHAT, json=chat()) as response,
    ):
        body = await response.aread()
    assert body.startswith(b": keep-alive\n\n")
    assert body.count(b": keep-alive\n\n") >= 2
    assert "".join(d.get("content") or "" for d in deltas(body)) == "late"


async def test_a_server_that_closes_each_connection_says_so(client: httpx.AsyncClient) -> None:
    script = Script(replies=[Reply(text="one"), Reply(text="two")], keep_alive=False)
    async with FakeLLM(script) as server:
        first = await client.post(server.base_url + CHAT, json=chat())
        second = await client.post(server.base_url + CHAT, json=chat(stream=False))
    assert first.headers["connection"] == second.headers["connection"] == "close"
    assert server.requests[0].connection != server.requests[1].connection
    assert all(r.finished_at is not None for r in server.requests)


async def test_a_client_that_times_out_waiting_is_recorded_as_gone() -> None:
    # The reply would wait ten minutes for its first byte: the record is done within
    # the hang guard only if the server noticed the client leave.
    async with (
        FakeLLM([Reply(text="late", first_byte_delay_ms=600_000)]) as server,
        httpx.AsyncClient(timeout=httpx.Timeout(HANG_S, read=0.2)) as impatient,
    ):
        with pytest.raises(httpx.ReadTimeout):
            await impatient.post(server.base_url + CHAT, json=chat())
        record = server.requests[0]
        await asyncio.wait_for(record.done.wait(), HANG_S)
    assert record.status is None
    assert record.disconnected_at is not None


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


# --- disconnects and shutdown -----------------------------------------------------------


async def test_a_client_leaving_mid_stream_is_noticed_at_once(client: httpx.AsyncClient) -> None:
    # The stream would last two minutes: the record is done within the hang guard only
    # if the server noticed the client leave, not when its stream ran out.
    reply = Reply(text="x" * 2400, chunk_size=2, chunk_delay_ms=100)
    async with FakeLLM([reply]) as server:
        seen = 0
        async with client.stream("POST", server.base_url + CHAT, json=chat()) as response:
            async for line in response.aiter_lines():
                seen += line.startswith("data: ")
                if seen == 3:
                    left = time.monotonic()
                    break
        record = server.requests[0]
        await asyncio.wait_for(record.done.wait(), HANG_S)

    assert record.disconnected_at is not None
    assert record.disconnected_at >= left
    assert record.finished_at is None


async def test_closing_the_server_ends_streams_in_flight(client: httpx.AsyncClient) -> None:
    # The stream would last over three minutes: closing does not wait for it.
    server = FakeLLM([Reply(text="x" * 200, chunk_size=1, chunk_delay_ms=1000)])
    await server.start()
    try:
        async with client.stream("POST", server.base_url + CHAT, json=chat()) as response:
            lines = response.aiter_lines()
            assert (await anext(lines)).startswith("data: ")
            await asyncio.wait_for(server.close(), HANG_S)
            with pytest.raises(httpx.RemoteProtocolError):
                async for _ in lines:
                    pass
    finally:
        await server.close()
    assert server.requests[0].done.is_set()


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
