"""Requests to the scripted model server and readers of its SSE replies, for its tests."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.waits import HANG_S

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
