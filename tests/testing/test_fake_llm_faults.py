"""The scripted model server's faults (errors, cut and malformed streams, slow and
held replies, closed connections), and a client leaving or the server closing
mid-stream, driven by a real HTTP client (httpx) over 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from dsh.testing import (
    FakeLLM,
    Fault,
    Reply,
    Script,
    error_body,
)
from tests.support.waits import HANG_S
from tests.testing.fake_llm_support import CHAT, TIMEOUT, chat, deltas, payloads, stream_until_error


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
