"""A scripted OpenAI/DeepSeek-compatible HTTP server, for testing model clients.

:class:`FakeLLM` listens on 127.0.0.1 and answers ``POST /chat/completions`` and
``GET /models`` (with or without a ``/v1`` prefix). Each chat request consumes the next
:class:`Reply` of its :class:`Script`, streamed in DeepSeek's byte format, or answered
with a fault: an HTTP error, a slow first byte, a stream cut short or a malformed line.
Every request is recorded in :attr:`FakeLLM.requests`, together with when its client
went away if it did so before the response was complete.

Run it by hand with ``python -m dsh.testing.fake_llm --script FILE [--port N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http
import json
import logging
import secrets
import signal
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "FakeLLM",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "ToolCallSpec",
    "Usage",
    "error_body",
    "load_script",
    "main",
]

_log = logging.getLogger("dsh.testing")

JsonObject: TypeAlias = dict[str, Any]

HOST = "127.0.0.1"
DEFAULT_MODELS = ("deepseek-v4-flash", "deepseek-v4-pro")
MALFORMED_LINE = b"data: {this is not json\n\n"
KEEPALIVE_COMMENT = b": keep-alive\n\n"

_MAX_HEAD_BYTES = 64 * 1024
_MAX_BODY_BYTES = 64 * 1024 * 1024
# Like nginx's keepalive_requests: a client reconnects after this many, which keeps the
# per-connection loop bounded.
_MAX_REQUESTS_PER_CONNECTION = 1000
_MAX_TRAILER_LINES = 100
_CLOSE_TIMEOUT = 5.0


# --- the script ---------------------------------------------------------------------


class _ScriptModel(BaseModel):
    # Scripts mirror the OpenAI wire, so they keep its snake_case names rather than
    # dsh's camelCase; unknown fields fail, so a typo is an error instead of a default.
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCallSpec(_ScriptModel):
    """One tool call of a reply. A dict ``arguments`` is sent as its JSON; a string is
    sent verbatim, so a test can send arguments that are not valid JSON."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None
    """Default: ``call_<index>_<random hex>``, shaped like DeepSeek's ``call_00_...``."""

    @property
    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class Usage(_ScriptModel):
    """Token counts reported for a reply, mapped onto DeepSeek's usage fields."""

    prompt_tokens: NonNegativeInt
    completion_tokens: NonNegativeInt
    cache_hit_tokens: NonNegativeInt = 0
    """Sent as ``prompt_cache_hit_tokens`` and ``prompt_tokens_details.cached_tokens``."""
    reasoning_tokens: NonNegativeInt | None = None
    """Sent as ``completion_tokens_details.reasoning_tokens``; left out when None."""

    @model_validator(mode="after")
    def _parts_fit_their_totals(self) -> Usage:
        if self.cache_hit_tokens > self.prompt_tokens:
            raise ValueError("cache_hit_tokens cannot exceed prompt_tokens")
        if self.reasoning_tokens is not None and self.reasoning_tokens > self.completion_tokens:
            raise ValueError("reasoning_tokens cannot exceed completion_tokens")
        return self

    def to_wire(self) -> JsonObject:
        """DeepSeek's usage object, in its field order."""
        wire: JsonObject = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cache_hit_tokens},
        }
        if self.reasoning_tokens is not None:
            wire["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        wire["prompt_cache_hit_tokens"] = self.cache_hit_tokens
        wire["prompt_cache_miss_tokens"] = self.prompt_tokens - self.cache_hit_tokens
        return wire


class Fault(_ScriptModel):
    """An HTTP error answered instead of a completion."""

    status: int = Field(ge=200, le=599)
    body: dict[str, Any] | str | None = None
    """A dict is sent as JSON, a string verbatim (as ``text/plain`` unless ``headers``
    say otherwise); None sends DeepSeek's error object for ``status``."""
    retry_after: NonNegativeFloat | None = None
    """Sent as a ``Retry-After`` header, in seconds."""
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers_fit_http(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            _check_header(name, value)
        return headers


class Reply(_ScriptModel):
    """The answer to one chat request.

    Events are the ``data:`` lines of the stream, counted from 0, including the
    malformed line and ``[DONE]``. ``keepalive`` comments are not events.
    """

    reasoning: str = ""
    text: str = ""
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None
    """Default: ``tool_calls`` when there are tool calls, else ``stop``."""
    usage: Usage | None = None
    """Default: estimated from the sizes of the request and the reply."""
    chunk_size: PositiveInt = 4
    """Characters per delta."""
    chunk_delay_ms: NonNegativeFloat = 0
    """Pause between stream writes."""
    first_byte_delay_ms: NonNegativeFloat = 0
    """Pause before the response headers."""
    fault: Fault | None = None
    """Answer with this error instead; the options below are then unused."""
    cut_after: NonNegativeInt | None = None
    """Close the connection after this many events, without the terminating chunk (a
    non-streaming answer is cut halfway through its body instead)."""
    malformed_at: NonNegativeInt | None = None
    """Insert ``data: {this is not json`` as event number N (at most just before
    ``[DONE]``). A non-streaming answer becomes that text."""
    keepalive: bool = False
    """Send a ``: keep-alive`` comment before the first event."""
    model: str | None = None
    """The model named in the answer. Default: the one the request asked for."""

    @property
    def resolved_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


class Script(_ScriptModel):
    """What a :class:`FakeLLM` answers. A JSON list validates as just the replies."""

    replies: list[Reply] = Field(default_factory=list)
    models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS))
    """Listed by ``GET /models``."""
    require_key: str | None = None
    """When set, requests must carry ``Authorization: Bearer <key>`` or get a 401."""

    @model_validator(mode="before")
    @classmethod
    def _a_list_is_the_replies(cls, value: Any) -> Any:
        return {"replies": value} if isinstance(value, list) else value


class ScriptError(ValueError):
    """A script file that cannot be read or does not have the script shape."""


ScriptLike: TypeAlias = Script | Mapping[str, Any] | Sequence[Reply | Mapping[str, Any]]


def load_script(path: str | Path) -> Script:
    """Read a script file: JSON in the :class:`Script` shape, or a list of replies."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ScriptError(f"{path}: cannot read the script: {error}") from error
    except ValueError as error:
        raise ScriptError(f"{path}: not JSON: {error}") from error
    try:
        return Script.model_validate(value)
    except ValidationError as error:
        raise ScriptError(f"{path}: not a valid script: {error}") from error


def _as_script(script: ScriptLike | None) -> Script:
    if script is None:
        return Script()
    if isinstance(script, Script):
        return script
    if isinstance(script, Mapping):
        return Script.model_validate(dict(script))
    return Script.model_validate(list(script))


def _check_header(name: str, value: str) -> None:
    if not name or any(c in name for c in ' \t\r\n:"(),/;<=>?@[\\]{}'):
        raise ValueError(f"header name {name!r} is not an HTTP token")
    if "\r" in value or "\n" in value:
        raise ValueError(f"header {name} has a line break in its value")
    try:
        (name + value).encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header {name} must be latin-1") from None


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
    status: int | None = None
    """The status sent; None if the headers never went out."""
    finished_at: float | None = None
    """When the response was completely written."""
    disconnected_at: float | None = None
    """When the client went away before the response was complete."""
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)
    """Set once the server is through with the response, however it ended: await
    ``asyncio.wait_for(record.done.wait(), timeout)`` before checking the fields above."""


# --- HTTP -----------------------------------------------------------------------------


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Connection:
    """The reading side of one TCP connection, with its own buffer.

    While a response is being written the server keeps reading, to notice at once when
    the client goes away; whatever a pipelining client sends meanwhile waits here.
    """

    def __init__(self, number: int, reader: asyncio.StreamReader) -> None:
        self.number = number
        self._reader = reader
        self.buffer = bytearray()
        self.eof = False

    async def fill(self) -> bool:
        """Read what arrives next into the buffer; False once the peer has closed."""
        if self.eof:
            return False
        data = await self._reader.read(65536)
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    async def read_ahead(self) -> None:
        """Read until the peer closes (returning) or has sent more than any request."""
        while len(self.buffer) <= _MAX_HEAD_BYTES + _MAX_BODY_BYTES:
            if not await self.fill():
                return
        # Too much pipelined: stop reading and wait to be cancelled when the sender ends.
        await asyncio.Event().wait()

    async def read_until(self, separator: bytes, limit: int) -> bytes | None:
        """Bytes up to and including ``separator``; None if the peer closed first. More
        than ``limit`` bytes without it is a 431."""
        while len(self.buffer) <= limit + len(separator):
            index = self.buffer.find(separator)
            if index >= 0:
                end = index + len(separator)
                data = bytes(self.buffer[:end])
                del self.buffer[:end]
                return data
            if not await self.fill():
                return None
        raise _BadRequest(431, "request head too large")

    async def read_exactly(self, size: int) -> bytes | None:
        while len(self.buffer) < size:
            if not await self.fill():
                return None
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


@dataclass
class _Head:
    method: str
    target: str
    version: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


def _parse_head(data: bytes) -> _Head:
    lines = data.decode("latin-1").split("\r\n")
    while lines and not lines[0]:
        lines.pop(0)  # stray line breaks before a request line are allowed (RFC 9112)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not parts[0] or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise _BadRequest(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise _BadRequest(400, f"malformed header line {line!r}")
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return _Head(parts[0].upper(), parts[1], parts[2], headers)


async def _read_body(connection: _Connection, head: _Head) -> bytes:
    encoding = head.headers.get("transfer-encoding", "").strip().lower()
    if encoding:
        if encoding != "chunked":
            raise _BadRequest(501, f"unsupported transfer encoding {encoding!r}")
        return await _read_chunked(connection)
    text = head.headers.get("content-length", "0").strip()
    if not text.isdigit():
        raise _BadRequest(400, f"bad Content-Length {text!r}")
    size = int(text)
    if size > _MAX_BODY_BYTES:
        raise _BadRequest(413, "request body too large")
    body = await connection.read_exactly(size)
    if body is None:
        raise ConnectionResetError("the client closed the connection mid-request")
    return body


async def _read_chunked(connection: _Connection) -> bytes:
    body = bytearray()
    while len(body) <= _MAX_BODY_BYTES:
        line = await connection.read_until(b"\r\n", 1024)
        if line is None:
            raise ConnectionResetError("the client closed the connection mid-request")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest(400, "malformed chunk size") from None
        if size == 0:
            await _skip_trailers(connection)
            return bytes(body)
        chunk = await connection.read_exactly(size + 2)
        if chunk is None:
            raise ConnectionResetError("the client closed the connection mid-request")
        body += chunk[:-2]
    raise _BadRequest(413, "request body too large")


async def _skip_trailers(connection: _Connection) -> None:
    for _ in range(_MAX_TRAILER_LINES):
        line = await connection.read_until(b"\r\n", _MAX_HEAD_BYTES)
        if line in (b"\r\n", None):
            return
    raise _BadRequest(431, "too many trailer lines")


def _response_head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_phrase(status)}",
        *(f"{name}: {value}" for name, value in headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _merge_headers(
    defaults: Sequence[tuple[str, str]], overrides: Mapping[str, str]
) -> list[tuple[str, str]]:
    replaced = {name.lower() for name in overrides}
    merged = [(name, value) for name, value in defaults if name.lower() not in replaced]
    merged.extend(overrides.items())
    return merged


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _json_bytes(value: Any) -> bytes:
    # DeepSeek sends compact JSON with non-ASCII text as UTF-8.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _retry_after_text(seconds: float) -> str:
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


# DeepSeek's documented error statuses and messages. The type and code strings of 401
# and 402 are the ones DeepSeek sends; the others are plausible stand-ins.
_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("Invalid request format", "invalid_request_error", "invalid_request_error"),
    401: (
        "Authentication Fails, Your api key is invalid",
        "authentication_error",
        "invalid_request_error",
    ),
    402: ("Insufficient Balance", "unknown_error", "invalid_request_error"),
    404: ("Not Found", "invalid_request_error", "not_found"),
    422: ("Invalid Parameters", "invalid_request_error", "invalid_request_error"),
    429: ("Rate Limit Reached", "rate_limit_error", "rate_limit_exceeded"),
    500: ("Server Error", "server_error", "server_error"),
    503: ("Server Overloaded", "server_error", "server_overloaded"),
}


def error_body(status: int, message: str | None = None, code: str | None = None) -> JsonObject:
    """DeepSeek's error object for ``status``, optionally with another message or code."""
    default_message, kind, default_code = _ERRORS.get(
        status,
        (
            _phrase(status),
            "invalid_request_error" if status < 500 else "server_error",
            "invalid_request_error" if status < 500 else "server_error",
        ),
    )
    return {
        "error": {
            "message": message or default_message,
            "type": kind,
            "param": None,
            "code": code or default_code,
        }
    }


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


# --- rendering replies ----------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _estimated_usage(reply: Reply, request_raw: bytes) -> Usage:
    prompt = max(1, len(request_raw.decode("utf-8", "replace")) // 4)
    reply_chars = len(reply.reasoning) + len(reply.text)
    reply_chars += sum(len(c.name) + len(c.arguments_text) for c in reply.tool_calls)
    completion = max(1, reply_chars // 4)
    reasoning = min(completion, max(1, len(reply.reasoning) // 4)) if reply.reasoning else None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, reasoning_tokens=reasoning)


@dataclass
class _Rendering:
    """The per-response values shared by every chunk of one answer."""

    reply: Reply
    model: str
    usage: Usage
    call_ids: list[str]
    fingerprint: str
    completion_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: int = field(default_factory=lambda: int(time.time()))

    def chunk(self, delta: JsonObject, finish: str | None) -> JsonObject:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def stream_events(self, include_usage: bool) -> list[bytes]:
        """Every ``data:`` event of the stream, ``[DONE]`` and any malformed line included."""
        reply = self.reply
        size = reply.chunk_size
        reasoning = bool(reply.reasoning)
        deltas: list[JsonObject] = [
            {"role": "assistant", "content": None, "reasoning_content": ""}
            if reasoning
            else {"role": "assistant", "content": ""}
        ]
        deltas.extend(
            {"content": None, "reasoning_content": p} for p in _pieces(reply.reasoning, size)
        )
        deltas.extend(
            {"content": p, "reasoning_content": None} if reasoning else {"content": p}
            for p in _pieces(reply.text, size)
        )
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, self.call_ids, strict=True)):
            function = {"name": call.name, "arguments": ""}
            deltas.append(
                {
                    "tool_calls": [
                        {"index": index, "id": call_id, "type": "function", "function": function}
                    ]
                }
            )
            deltas.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": p}}]}
                for p in _pieces(call.arguments_text, size)
            )
        chunks = [self.chunk(delta, None) for delta in deltas]
        last_delta: JsonObject = (
            {"content": "", "reasoning_content": None} if reasoning else {"content": ""}
        )
        last = self.chunk(last_delta, reply.resolved_finish_reason)
        if include_usage:
            last["usage"] = self.usage.to_wire()
        chunks.append(last)
        events = [b"data: " + _json_bytes(c) + b"\n\n" for c in chunks]
        events.append(b"data: [DONE]\n\n")
        if reply.malformed_at is not None:
            events.insert(min(reply.malformed_at, len(events) - 1), MALFORMED_LINE)
        return events

    def completion(self) -> JsonObject:
        reply = self.reply
        message: JsonObject = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text},
                }
                for call, call_id in zip(reply.tool_calls, self.call_ids, strict=True)
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.resolved_finish_reason,
                }
            ],
            "usage": self.usage.to_wire(),
            "system_fingerprint": self.fingerprint,
        }


# --- the server -----------------------------------------------------------------------

_Send: TypeAlias = Callable[[asyncio.StreamWriter], Coroutine[Any, Any, bool]]
"""Writes one response; returns whether it was written whole (False: cut short)."""


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
        return [r for r in self.requests if _route(r.path) == "/chat/completions"]

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
        task = asyncio.create_task(self._serve(_Connection(self._connection_count, reader), writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, connection: _Connection, writer: asyncio.StreamWriter) -> None:
        try:
            for _ in range(_MAX_REQUESTS_PER_CONNECTION):
                if not await self._serve_one(connection, writer):
                    break
        except _BadRequest as error:
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

    async def _serve_one(self, connection: _Connection, writer: asyncio.StreamWriter) -> bool:
        """Read and answer one request; False when the connection should close."""
        data = await connection.read_until(b"\r\n\r\n", _MAX_HEAD_BYTES)
        if data is None:
            if connection.buffer.strip():
                raise ConnectionResetError("the client closed the connection mid-request")
            return False
        head = _parse_head(data)
        if head.headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        raw = await _read_body(connection, head)
        record = RecordedRequest(
            method=head.method,
            path=head.target,
            headers=head.headers,
            body=_parse_json(raw),
            raw=raw,
            arrived_at=time.monotonic(),
            connection=connection.number,
        )
        self.requests.append(record)
        try:
            send = self._answer(record, keep=head.keep_alive)
            complete = await self._send_watched(connection, writer, record, send)
            return complete and head.keep_alive
        finally:
            record.done.set()
            if self._on_response is not None:
                self._on_response(record)

    async def _send_watched(
        self,
        connection: _Connection,
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
        route = _route(record.path)
        known = {"/chat/completions": "POST", "/models": "GET"}
        if known.get(route) != record.method:
            body = error_body(404, f"Not Found: {record.method} {record.path}")
            return self._plain(record, 404, body, keep=keep)
        if not self._authorized(record):
            return self._plain(record, 401, self._auth_error(record), keep=keep)
        if route == "/models":
            models = [
                {"id": m, "object": "model", "owned_by": "deepseek"} for m in self.script.models
            ]
            return self._plain(record, 200, {"object": "list", "data": models}, keep=keep)
        if not isinstance(record.body, dict):
            return self._plain(
                record, 400, error_body(400, "the body is not a JSON object"), keep=keep
            )
        if not self._replies:
            message = (
                f"fake LLM script exhausted: no reply left for chat request "
                f"{len(self.chat_requests)} ({record.method} {record.path})"
            )
            return self._plain(record, 500, error_body(500, message, "script_exhausted"), keep=keep)
        reply = self._replies.popleft()
        record.reply = reply
        return self._reply(record, reply, keep=keep)

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
            payload, content_type = _json_bytes(body), "application/json"
        defaults = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(payload))),
            ("Connection", "keep-alive" if keep else "close"),
        ]
        if record is not None:
            record.status = status
        writer.write(_response_head(status, _merge_headers(defaults, headers or {})) + payload)
        await writer.drain()
        return True

    def _reply(self, record: RecordedRequest, reply: Reply, *, keep: bool) -> _Send:
        body: JsonObject = record.body
        stream_options = body.get("stream_options")
        include_usage = (
            isinstance(stream_options, dict) and stream_options.get("include_usage") is True
        )
        rendering = _Rendering(
            reply=reply,
            model=self._model_for(reply, body),
            usage=reply.usage or _estimated_usage(reply, record.raw),
            call_ids=[
                call.id or f"call_{index:02d}_{secrets.token_hex(12)}"
                for index, call in enumerate(reply.tool_calls)
            ],
            fingerprint=self._fingerprint,
        )
        streaming = body.get("stream") is True

        async def send(writer: asyncio.StreamWriter) -> bool:
            if reply.first_byte_delay_ms:
                await asyncio.sleep(reply.first_byte_delay_ms / 1000)
            if reply.fault is not None:
                return await self._send_fault(writer, record, reply.fault, keep=keep)
            if streaming:
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
            headers["Retry-After"] = _retry_after_text(fault.retry_after)
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
        rendering: _Rendering,
        *,
        keep: bool,
    ) -> bool:
        if reply.malformed_at is not None:
            payload = MALFORMED_LINE[len(b"data: ") :].strip()
        else:
            payload = _json_bytes(rendering.completion())
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(payload))),
            ("Connection", "keep-alive" if keep else "close"),
        ]
        record.status = 200
        if reply.cut_after is not None:
            writer.write(_response_head(200, headers) + payload[: len(payload) // 2])
            await writer.drain()
            return False
        writer.write(_response_head(200, headers) + payload)
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
        writer.write(_response_head(200, headers))
        await writer.drain()
        writes = ([KEEPALIVE_COMMENT] if reply.keepalive else []) + events
        delay = reply.chunk_delay_ms / 1000
        sent_events = 0
        for position, data in enumerate(writes):
            if reply.cut_after is not None and sent_events >= reply.cut_after:
                break
            if position and delay:
                await asyncio.sleep(delay)
            writer.write(_chunk(data))
            await writer.drain()
            if data is not KEEPALIVE_COMMENT:
                sent_events += 1
        if reply.cut_after is not None:
            return False  # the connection closes without the terminating chunk
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _route(target: str) -> str:
    path = target.split("?", 1)[0]
    if path == "/v1" or path.startswith("/v1/"):
        path = path[len("/v1") :]
    return path.rstrip("/") or "/"


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


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
