"""JSON-RPC framing and the request bookkeeping of the lsp plugin, over real streams:
messages split across reads or merged into one, bad headers that must fail rather
than hang, timeouts that cancel, and the answers the client gives a server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dsh_plugins.lsp.rpc import (
    MAX_MESSAGE_BYTES,
    METHOD_NOT_FOUND,
    Connection,
    ConnectionClosed,
    ProtocolError,
    RequestTimeout,
    ResponseError,
    encode,
    read_message,
)


def fed(*chunks: bytes, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    if eof:
        reader.feed_eof()
    return reader


async def test_a_message_round_trips_with_its_utf8_length() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo 😀"}}
    data = encode(message)
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    assert data == b"Content-Length: %d\r\n\r\n" % len(body) + body
    assert await read_message(fed(data)) == message
    assert await read_message(fed()) is None  # a clean end between messages


async def test_messages_split_across_reads_byte_by_byte() -> None:
    first = encode({"jsonrpc": "2.0", "method": "a", "params": {"x": "😀" * 10}})
    second = encode({"jsonrpc": "2.0", "method": "b"})
    reader = asyncio.StreamReader()

    async def trickle() -> None:
        for byte in first + second:
            reader.feed_data(bytes([byte]))
            await asyncio.sleep(0)
        reader.feed_eof()

    feeder = asyncio.create_task(trickle())
    assert (await read_message(reader) or {})["method"] == "a"
    assert (await read_message(reader) or {})["method"] == "b"
    assert await read_message(reader) is None
    await feeder


async def test_messages_merged_into_one_read_with_extra_headers() -> None:
    body = b'{"jsonrpc":"2.0","method":"m"}'
    data = (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        b"content-length: %d\r\n\r\n%b" % (len(body), body)
    )
    reader = fed(data + encode({"jsonrpc": "2.0", "id": 2, "result": None}) + data)
    assert [await read_message(reader) for _ in range(4)] == [
        {"jsonrpc": "2.0", "method": "m"},
        {"jsonrpc": "2.0", "id": 2, "result": None},
        {"jsonrpc": "2.0", "method": "m"},
        None,
    ]


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"hello there\r\n\r\n", "not a message header"),
        (b"Content-Length: lots\r\n\r\n{}", "bad Content-Length"),
        (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
        (b"Content-Length: %d\r\n\r\n" % (MAX_MESSAGE_BYTES + 1), "the limit is"),
        (b"Content-Length: 5\r\n\r\nnope!", "not UTF-8 JSON"),
        (b"Content-Length: 2\r\n\r\n[]", "not a JSON object"),
        (b"Content-Length: 10\r\n\r\n{}", "inside a message body"),
        (b"Content-Length: 10\r\n", "inside a message header"),
        (b"Content-Length: 2" + b"0" * 70_000, "too long"),
    ],
)
async def test_a_bad_message_is_an_error_not_a_hang(data: bytes, complaint: str) -> None:
    async with asyncio.timeout(2):
        with pytest.raises(ProtocolError, match=complaint):
            await read_message(fed(data))


# ---------------------------------------------------------------------- connection


class Peer:
    """The far end of a socket pair, speaking the framing by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def receive(self) -> dict[str, Any]:
        async with asyncio.timeout(2):
            message = await read_message(self.reader)
        assert message is not None
        return message

    async def send(self, message: dict[str, Any]) -> None:
        self.writer.write(encode(message))
        await self.writer.drain()


@contextlib.asynccontextmanager
async def connected(
    on_request: Any = None, notes: list[tuple[str, Any]] | None = None
) -> AsyncIterator[tuple[Connection, Peer]]:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    peer = Peer(*await asyncio.open_connection(sock=theirs))

    def refuse(method: str, params: Any) -> Any:
        raise ResponseError(METHOD_NOT_FOUND, f"no {method}")

    received = notes if notes is not None else []
    connection = Connection(
        reader,
        writer,
        on_request=on_request or refuse,
        on_notification=lambda method, params: received.append((method, params)),
    )
    loop = asyncio.create_task(connection.run())
    try:
        yield connection, peer
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        for end in (writer, peer.writer):
            end.close()
            with contextlib.suppress(ConnectionError):
                await end.wait_closed()


async def test_requests_get_their_own_answers_in_any_order() -> None:
    async with connected() as (connection, peer):
        first = asyncio.create_task(connection.request("a", {}, 2))
        second = asyncio.create_task(connection.request("b", {}, 2))
        one, two = await peer.receive(), await peer.receive()
        assert (one["method"], two["method"]) == ("a", "b")
        await peer.send({"jsonrpc": "2.0", "id": two["id"], "result": "B"})
        await peer.send(
            {"jsonrpc": "2.0", "id": one["id"], "error": {"code": -32000, "message": "nope"}}
        )
        assert await second == "B"
        with pytest.raises(ResponseError, match="nope"):
            await first
        # Answered requests, errors included, are not cancelled afterwards.
        task = asyncio.create_task(connection.request("c", {}, 2))
        third = await peer.receive()
        assert third["method"] == "c"
        await peer.send({"jsonrpc": "2.0", "id": third["id"], "result": None})
        assert await task is None


async def test_a_request_that_times_out_is_cancelled_on_the_server() -> None:
    async with connected() as (connection, peer):
        with pytest.raises(RequestTimeout, match=r"slow took longer than 0\.1 s"):
            await connection.request("slow", None, 0.1)
        request, cancel = await peer.receive(), await peer.receive()
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "$/cancelRequest",
            "params": {"id": request["id"]},
        }
        # A late answer is dropped; the connection goes on.
        await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": 1})
        task = asyncio.create_task(connection.request("next", None, 2))
        following = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": following["id"], "result": 2})
        assert await task == 2


async def test_server_requests_are_answered_and_notifications_delivered() -> None:
    notes: list[tuple[str, Any]] = []

    def answer(method: str, params: Any) -> Any:
        if method == "workspace/configuration":
            return [None for _ in params["items"]]
        raise ResponseError(METHOD_NOT_FOUND, f"no {method}")

    async with connected(answer, notes) as (_, peer):
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": "x",
                "method": "workspace/configuration",
                "params": {"items": [{"section": "a"}, {"section": "b"}]},
            }
        )
        assert await peer.receive() == {"jsonrpc": "2.0", "id": "x", "result": [None, None]}
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "what/ever"})
        reply = await peer.receive()
        assert reply["id"] == 7
        assert reply["error"]["code"] == METHOD_NOT_FOUND
        await peer.send({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"m": 1}})
        await peer.send({"jsonrpc": "2.0", "id": 8, "method": "x"})
        await peer.receive()  # after the notification, so it was handled
        assert notes == [("window/logMessage", {"m": 1})]


async def test_the_end_of_the_stream_fails_requests_in_flight() -> None:
    async with connected() as (connection, peer):
        pending = asyncio.create_task(connection.request("a", None, 5))
        await peer.receive()
        peer.writer.close()
        with pytest.raises(ConnectionClosed):
            await pending
        with pytest.raises(ConnectionClosed):
            await connection.request("b", None, 5)


async def test_garbage_fails_requests_in_flight_with_a_protocol_error() -> None:
    async with connected() as (connection, peer):
        pending = asyncio.create_task(connection.request("a", None, 5))
        await peer.receive()
        peer.writer.write(b"debug print from the server\r\n")
        with pytest.raises(ProtocolError, match="not a message header"):
            await pending
