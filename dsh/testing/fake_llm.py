"""A scripted OpenAI/DeepSeek-compatible HTTP server, for testing model clients.

:class:`FakeLLM` listens on 127.0.0.1 and answers ``POST /chat/completions``,
``GET /models`` and DeepSeek's web tools, ``POST /tools/search`` and ``POST
/tools/fetch`` (each with or without a ``/v1`` prefix). Each chat request consumes the next
:class:`Reply` of its :class:`Script`, streamed in DeepSeek's byte format, or answered
with a fault: an HTTP error, a slow first byte, a stream cut short, held open or
waiting with keep-alive comments, or a malformed line.
Every request is recorded in :attr:`FakeLLM.requests`, together with when its client
went away if it did so before the response was complete.

The script format is in :mod:`dsh.testing.script`, the HTTP/1.1 framing in
:mod:`dsh.testing.http11`, what a reply looks like on the wire in
:mod:`dsh.testing.rendering`.

Run it by hand with ``python -m dsh.testing.fake_llm --script FILE [--port N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import secrets
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from dsh.testing.http11 import (
    KEEPALIVE_COMMENT,
    MAX_HEAD_BYTES,
    BadRequest,
    Connection,
    chunk,
    error_body,
    merge_headers,
    parse_head,
    parse_json,
    read_body,
    response_head,
    retry_after_text,
    route,
    wait_alive,
)
from dsh.testing.rendering import (
    MALFORMED_LINE,
    PrefixCache,
    Rendering,
    cached_usage,
    estimated_usage,
    json_bytes,
)
from dsh.testing.script import (
    DEFAULT_MODELS,
    Fault,
    JsonObject,
    Page,
    Reply,
    Script,
    ScriptError,
    SearchResult,
    ToolCallSpec,
    Usage,
    load_script,
)

__all__ = [
    "FakeLLM",
    "Fault",
    "Page",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "SearchResult",
    "ToolCallSpec",
    "Usage",
    "error_body",
    "load_script",
    "main",
]

_log = logging.getLogger("dsh.testing")

HOST = "127.0.0.1"

# Like nginx's keepalive_requests: a client reconnects after this many, which keeps the
# per-connection loop bounded.
_MAX_REQUESTS_PER_CONNECTION = 1000
_CLOSE_TIMEOUT = 5.0


# --- recording ----------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request as it arrived, and what became of its response.

    Times are ``time.monotonic()`` seconds, comparable with the test's own clock.
    """

    method: str
    path: str
    """The request target as sent, query included."""
    headers: dict[str, str]
    """Names in lower case; repeated headers joined with ``", "``."""
    body: Any
    """The body parsed as JSON; None when it is empty or not JSON."""
    raw: bytes
    arrived_at: float
    connection: int
    """Which TCP connection carried it (1, 2, ... in order of acceptance)."""
    reply: Reply | None = None
    """The script reply that answered it, if one did."""
    usage: Usage | None = None
    """The usage its answer reported (the script's, or the server's estimate)."""
    status: int | None = None
    """The status sent; None if the headers never went out."""
    finished_at: float | None = None
    """When the response was completely written."""
    disconnected_at: float | None = None
    """When the client went away before the response was complete."""
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)
    """Set once the server is through with the response, however it ended: await
    ``asyncio.wait_for(record.done.wait(), timeout)`` before checking the fields above."""


# --- rendering replies ----------------------------------------------------------------


# --- the server -----------------------------------------------------------------------

_Send: TypeAlias = Callable[[asyncio.StreamWriter], Coroutine[Any, Any, bool]]
"""Writes one response; returns whether it was written whole (False: cut short)."""

ScriptLike: TypeAlias = Script | Mapping[str, Any] | Sequence[Reply | Mapping[str, Any]]


class FakeLLM:
    """A scripted chat-completions server on 127.0.0.1.

    ``async with FakeLLM(script) as server:`` starts it; point a client at
    :attr:`base_url`. Replies are consumed in order, one per chat request; when none is
    left the answer is a 500 saying the script is exhausted.
    """

    def __init__(
        self,
        script: ScriptLike | None = None,
        *,
        port: int = 0,
        on_response: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        """``port`` 0 picks a free one. ``on_response`` is called as each response ends."""
        self.script = _as_script(script)
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque(self.script.replies)
        self._port = port
        self._on_response = on_response
        self._fingerprint = f"fp_{secrets.token_hex(5)}"
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._connection_count = 0
        self._gates: dict[str, asyncio.Event] = {}
        self._prefix_cache = PrefixCache()

    def _gate(self, name: str) -> asyncio.Event:
        return self._gates.setdefault(name, asyncio.Event())

    def open_gate(self, name: str) -> None:
        """Let the replies held by the gate ``name`` (``Reply.gate``) be answered."""
        self._gate(name).set()

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the fake LLM is already started")
        self._server = await asyncio.start_server(self._accept, HOST, self._port)
        self._port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and end every connection, mid-response or not."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CLOSE_TIMEOUT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), _CLOSE_TIMEOUT)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake LLM is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``; the routes answer with or without ``/v1``."""
        return f"http://{HOST}:{self.port}"

    @property
    def remaining(self) -> int:
        """How many replies are left."""
        return len(self._replies)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if route(r.path) == "/chat/completions"]

    @property
    def search_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if route(r.path) == "/tools/search"]

    @property
    def fetch_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if route(r.path) == "/tools/fetch"]

    def add(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Append replies to the script."""
        for reply in replies:
            self._replies.append(reply if isinstance(reply, Reply) else Reply.model_validate(reply))

    # -- connections --

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._server is None:
            writer.close()  # accepted while closing: no task would own it
            return
        self._connection_count += 1
        task = asyncio.create_task(self._serve(Connection(self._connection_count, reader), writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, connection: Connection, writer: asyncio.StreamWriter) -> None:
        try:
            for _ in range(_MAX_REQUESTS_PER_CONNECTION):
                if not await self._serve_one(connection, writer):
                    break
        except BadRequest as error:
            with contextlib.suppress(ConnectionError):
                await self._send_plain(
                    writer, None, error.status, error_body(error.status, error.message), keep=False
                )
        except ConnectionError:
            pass
        except Exception:
            _log.exception("fake LLM: connection %d failed", connection.number)
        finally:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), _CLOSE_TIMEOUT)

    async def _serve_one(self, connection: Connection, writer: asyncio.StreamWriter) -> bool:
        """Read and answer one request; False when the connection should close."""
        data = await connection.read_until(b"\r\n\r\n", MAX_HEAD_BYTES)
        if data is None:
            if connection.buffer.strip():
                raise ConnectionResetError("the client closed the connection mid-request")
            return False
        head = parse_head(data)
        if head.headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        raw = await read_body(connection, head)
        record = RecordedRequest(
            method=head.method,
            path=head.target,
            headers=head.headers,
            body=parse_json(raw),
            raw=raw,
            arrived_at=time.monotonic(),
            connection=connection.number,
        )
        self.requests.append(record)
        try:
            keep = head.keep_alive and self.script.keep_alive
            send = self._answer(record, keep=keep)
            complete = await self._send_watched(connection, writer, record, send)
            return complete and keep
        finally:
            record.done.set()
            if self._on_response is not None:
                self._on_response(record)

    async def _send_watched(
        self,
        connection: Connection,
        writer: asyncio.StreamWriter,
        record: RecordedRequest,
        send: _Send,
    ) -> bool:
        """Run ``send`` while reading ahead, so a client that leaves mid-response (often
        while the server sleeps between events) is noticed at once."""
        sender = asyncio.create_task(self._send_and_note(writer, record, send))
        watcher = asyncio.create_task(connection.read_ahead())
        try:
            done, _ = await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if sender not in done:
                # The watcher only ends at EOF or a reset. A client that half-closes and
                # then waits is taken for one that left: HTTP clients do not half-close.
                record.disconnected_at = time.monotonic()
                return False
            return sender.result()
        except ConnectionError:
            record.disconnected_at = time.monotonic()
            return False
        finally:
            sender.cancel()
            watcher.cancel()
            await asyncio.gather(sender, watcher, return_exceptions=True)

    @staticmethod
    async def _send_and_note(
        writer: asyncio.StreamWriter, record: RecordedRequest, send: _Send
    ) -> bool:
        # Noted by the sender itself: the client may have read the response and the
        # server been closed before the connection task runs again.
        complete = await send(writer)
        if complete:
            record.finished_at = time.monotonic()
        return complete

    # -- answers --

    def _answer(self, record: RecordedRequest, *, keep: bool) -> _Send:
        path = route(record.path)
        known = {
            "/chat/completions": "POST",
            "/models": "GET",
            "/tools/search": "POST",
            "/tools/fetch": "POST",
        }
        if known.get(path) != record.method:
            body = error_body(404, f"Not Found: {record.method} {record.path}")
            return self._plain(record, 404, body, keep=keep)
        if not self._authorized(record):
            return self._plain(record, 401, self._auth_error(record), keep=keep)
        if path == "/models":
            models = [
                {"id": m, "object": "model", "owned_by": "deepseek"} for m in self.script.models
            ]
            return self._plain(record, 200, {"object": "list", "data": models}, keep=keep)
        if not isinstance(record.body, dict):
            return self._plain(
                record, 400, error_body(400, "the body is not a JSON object"), keep=keep
            )
        if path == "/tools/search":
            status, answer = self._search(record.body)
            return self._plain(record, status, answer, keep=keep)
        if path == "/tools/fetch":
            status, answer = self._fetch(record.body)
            return self._plain(record, status, answer, keep=keep)
        if not self._replies and self.script.after_last is not None:
            record.reply = self.script.after_last
            return self._reply(record, self.script.after_last, keep=keep)
        if not self._replies:
            message = (
                f"fake LLM script exhausted: no reply left for chat request "
                f"{len(self.chat_requests)} ({record.method} {record.path})"
            )
            return self._plain(record, 500, error_body(500, message, "script_exhausted"), keep=keep)
        reply = self._take(record.body)
        if reply is None:
            message = (
                f"fake LLM script: no reply left fits chat request {len(self.chat_requests)} "
                "(each reply left has a 'when' its user messages do not contain)"
            )
            return self._plain(record, 500, error_body(500, message, "script_exhausted"), keep=keep)
        record.reply = reply
        return self._reply(record, reply, keep=keep)

    def _take(self, body: JsonObject) -> Reply | None:
        """The first reply left that fits the request (see :attr:`Reply.when`)."""
        said = _user_text(body)
        for index, reply in enumerate(self._replies):
            if reply.when is None or reply.when in said:
                del self._replies[index]
                return reply
        return None

    def _search(self, body: JsonObject) -> tuple[int, JsonObject]:
        query, count = body.get("query"), body.get("count", 10)
        if not isinstance(query, str) or not 1 <= len(query) <= 128:
            return 400, error_body(400, "query must be a string of 1 to 128 characters")
        if not isinstance(count, int) or not 1 <= count <= 50:
            return 400, error_body(400, "count must be an integer from 1 to 50")
        with_content = body.get("need_content") is True
        results = [
            result.model_dump(exclude_none=True, exclude={"content"} if not with_content else None)
            for result in self.script.search_results[:count]
        ]
        return 200, {"results": results}

    def _fetch(self, body: JsonObject) -> tuple[int, JsonObject]:
        url = body.get("url")
        if not isinstance(url, str) or not url:
            return 400, error_body(400, "url must be a non-empty string")
        page = self.script.pages.get(url)
        if page is None:
            return 404, error_body(404, f"cannot fetch {url}")
        return 200, {"url": url, "title": page.title, "content": page.content}

    def _authorized(self, record: RecordedRequest) -> bool:
        if self.script.require_key is None:
            return True
        scheme, _, token = record.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token.strip() == self.script.require_key

    def _auth_error(self, record: RecordedRequest) -> JsonObject:
        _, _, token = record.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if not token:
            return error_body(401, "Authentication Fails, no api key was given")
        return error_body(401, f"Authentication Fails, Your api key: ****{token[-4:]} is invalid")

    def _plain(
        self,
        record: RecordedRequest,
        status: int,
        body: JsonObject | str,
        *,
        keep: bool,
        headers: Mapping[str, str] | None = None,
    ) -> _Send:
        async def send(writer: asyncio.StreamWriter) -> bool:
            return await self._send_plain(writer, record, status, body, keep=keep, headers=headers)

        return send

    async def _send_plain(
        self,
        writer: asyncio.StreamWriter,
        record: RecordedRequest | None,
        status: int,
        body: JsonObject | str,
        *,
        keep: bool,
        headers: Mapping[str, str] | None = None,
    ) -> bool:
        if isinstance(body, str):
            payload, content_type = body.encode("utf-8"), "text/plain; charset=utf-8"
        else:
            payload, content_type = json_bytes(body), "application/json"
        defaults = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(payload))),
            ("Connection", "keep-alive" if keep else "close"),
        ]
        if record is not None:
            record.status = status
        writer.write(response_head(status, merge_headers(defaults, headers or {})) + payload)
        await writer.drain()
        return True

    def _usage(self, reply: Reply, record: RecordedRequest) -> Usage:
        if not self.script.prompt_cache:
            return estimated_usage(reply, record.raw)
        return cached_usage(reply, record.raw, self._prefix_cache, record.body)

    def _reply(self, record: RecordedRequest, reply: Reply, *, keep: bool) -> _Send:
        body: JsonObject = record.body
        stream_options = body.get("stream_options")
        include_usage = (
            isinstance(stream_options, dict) and stream_options.get("include_usage") is True
        )
        record.usage = reply.usage or self._usage(reply, record)
        rendering = Rendering(
            reply=reply,
            model=self._model_for(reply, body),
            usage=record.usage,
            call_ids=[
                call.id or f"call_{index:02d}_{secrets.token_hex(12)}"
                for index, call in enumerate(reply.tool_calls)
            ],
            fingerprint=self._fingerprint,
        )
        streaming = body.get("stream") is True

        async def send(writer: asyncio.StreamWriter) -> bool:
            if reply.gate is not None:
                await self._gate(reply.gate).wait()
            if reply.first_byte_delay_ms:
                await asyncio.sleep(reply.first_byte_delay_ms / 1000)
            if reply.fault is not None:
                return await self._send_fault(writer, record, reply.fault, keep=keep)
            if streaming or reply.events is not None:
                events = rendering.stream_events(include_usage)
                return await self._send_stream(writer, record, reply, events, keep=keep)
            return await self._send_completion(writer, record, reply, rendering, keep=keep)

        return send

    def _model_for(self, reply: Reply, body: JsonObject) -> str:
        requested = body.get("model")
        if reply.model is not None:
            return reply.model
        if isinstance(requested, str) and requested:
            return requested
        return self.script.models[0] if self.script.models else DEFAULT_MODELS[0]

    async def _send_fault(
        self, writer: asyncio.StreamWriter, record: RecordedRequest, fault: Fault, *, keep: bool
    ) -> bool:
        headers: dict[str, str] = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = retry_after_text(fault.retry_after)
        headers.update(fault.headers)
        body = fault.body if fault.body is not None else error_body(fault.status)
        return await self._send_plain(
            writer, record, fault.status, body, keep=keep, headers=headers
        )

    async def _send_completion(
        self,
        writer: asyncio.StreamWriter,
        record: RecordedRequest,
        reply: Reply,
        rendering: Rendering,
        *,
        keep: bool,
    ) -> bool:
        if reply.malformed_at is not None:
            payload = MALFORMED_LINE[len(b"data: ") :].strip()
        else:
            payload = json_bytes(rendering.completion())
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(payload))),
            ("Connection", "keep-alive" if keep else "close"),
        ]
        record.status = 200
        if reply.cut_after is not None:
            writer.write(response_head(200, headers) + payload[: len(payload) // 2])
            await writer.drain()
            return False
        writer.write(response_head(200, headers) + payload)
        await writer.drain()
        return True

    async def _send_stream(
        self,
        writer: asyncio.StreamWriter,
        record: RecordedRequest,
        reply: Reply,
        events: list[bytes],
        *,
        keep: bool,
    ) -> bool:
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Transfer-Encoding", "chunked"),
            ("Cache-Control", "no-cache"),
            ("Connection", "keep-alive" if keep else "close"),
        ]
        record.status = 200
        writer.write(response_head(200, headers))
        await writer.drain()
        interval = reply.keepalive_interval_ms
        if reply.first_event_delay_ms:
            await wait_alive(writer, reply.first_event_delay_ms / 1000, interval)
        writes = ([KEEPALIVE_COMMENT] if reply.keepalive else []) + events
        delay = reply.chunk_delay_ms / 1000
        sent_events = 0
        for position, data in enumerate(writes):
            if reply.cut_after is not None and sent_events >= reply.cut_after:
                break
            if reply.hold_after is not None and sent_events >= reply.hold_after:
                # Held open until the client leaves: the watcher ends the response.
                await wait_alive(writer, None, interval)
            if position and delay:
                await asyncio.sleep(delay)
            writer.write(chunk(data))
            await writer.drain()
            if data is not KEEPALIVE_COMMENT:
                sent_events += 1
        if reply.cut_after is not None:
            return False  # the connection closes without the terminating chunk
        if reply.hold_after is not None:
            await wait_alive(writer, None, interval)  # held after its last event
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _user_text(body: JsonObject) -> str:
    """The text of every user message of a chat request, joined."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    texts: list[str] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [part.get("text", "") for part in content if isinstance(part, dict)]
    return "\n".join(texts)


def _as_script(script: ScriptLike | None) -> Script:
    if script is None:
        return Script()
    if isinstance(script, Script):
        return script
    if isinstance(script, Mapping):
        return Script.model_validate(dict(script))
    return Script.model_validate(list(script))


# --- command line ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dsh.testing.fake_llm --script FILE [--port N]``: serve until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m dsh.testing.fake_llm",
        description="Serve a scripted OpenAI/DeepSeek-compatible chat API on 127.0.0.1.",
    )
    parser.add_argument(
        "--script",
        required=True,
        metavar="FILE",
        help="JSON: {replies, models, require_key}, or just a list of replies",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: any free one)"
    )
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except ScriptError as error:
        print(error, file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(script, args.port))
    return 0


async def _serve_forever(script: Script, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            loop.add_signal_handler(signum, stop.set)

    def log(record: RecordedRequest) -> None:
        outcome = "client left" if record.disconnected_at is not None else record.status
        print(f"{record.method} {record.path} -> {outcome}", file=sys.stderr, flush=True)

    async with FakeLLM(script, port=port, on_response=log) as server:
        print(f"fake LLM listening on {server.base_url}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    raise SystemExit(main())
