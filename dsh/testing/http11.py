"""HTTP/1.1 framing for the scripted server in :mod:`dsh.testing.fake_llm`, and for it only.

Just what that server needs, and no general HTTP implementation: a connection's reading
side with its own buffer, request heads, bodies (``Content-Length`` or chunked), chunked
response encoding, response heads, DeepSeek's error objects for each status, routes,
and waits that keep a response alive with comments.
Malformed or oversized requests raise :class:`BadRequest`, to be answered with its
status before the connection closes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
KEEPALIVE_COMMENT = b": keep-alive\n\n"
_MAX_BODY_BYTES = 64 * 1024 * 1024
_MAX_TRAILER_LINES = 100


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Connection:
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
        while len(self.buffer) <= MAX_HEAD_BYTES + _MAX_BODY_BYTES:
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
        raise BadRequest(431, "request head too large")

    async def read_exactly(self, size: int) -> bytes | None:
        while len(self.buffer) < size:
            if not await self.fill():
                return None
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


@dataclass
class Head:
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


def parse_head(data: bytes) -> Head:
    lines = data.decode("latin-1").split("\r\n")
    while lines and not lines[0]:
        lines.pop(0)  # stray line breaks before a request line are allowed (RFC 9112)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not parts[0] or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise BadRequest(400, f"malformed header line {line!r}")
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return Head(parts[0].upper(), parts[1], parts[2], headers)


async def read_body(connection: Connection, head: Head) -> bytes:
    encoding = head.headers.get("transfer-encoding", "").strip().lower()
    if encoding:
        if encoding != "chunked":
            raise BadRequest(501, f"unsupported transfer encoding {encoding!r}")
        return await _read_chunked(connection)
    text = head.headers.get("content-length", "0").strip()
    if not text.isdigit():
        raise BadRequest(400, f"bad Content-Length {text!r}")
    size = int(text)
    if size > _MAX_BODY_BYTES:
        raise BadRequest(413, "request body too large")
    body = await connection.read_exactly(size)
    if body is None:
        raise ConnectionResetError("the client closed the connection mid-request")
    return body


async def _read_chunked(connection: Connection) -> bytes:
    body = bytearray()
    while len(body) <= _MAX_BODY_BYTES:
        line = await connection.read_until(b"\r\n", 1024)
        if line is None:
            raise ConnectionResetError("the client closed the connection mid-request")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadRequest(400, "malformed chunk size") from None
        if size == 0:
            await _skip_trailers(connection)
            return bytes(body)
        chunk = await connection.read_exactly(size + 2)
        if chunk is None:
            raise ConnectionResetError("the client closed the connection mid-request")
        body += chunk[:-2]
    raise BadRequest(413, "request body too large")


async def _skip_trailers(connection: Connection) -> None:
    for _ in range(_MAX_TRAILER_LINES):
        line = await connection.read_until(b"\r\n", MAX_HEAD_BYTES)
        if line in (b"\r\n", None):
            return
    raise BadRequest(431, "too many trailer lines")


def response_head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_phrase(status)}",
        *(f"{name}: {value}" for name, value in headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def merge_headers(
    defaults: Sequence[tuple[str, str]], overrides: Mapping[str, str]
) -> list[tuple[str, str]]:
    replaced = {name.lower() for name in overrides}
    merged = [(name, value) for name, value in defaults if name.lower() not in replaced]
    merged.extend(overrides.items())
    return merged


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def retry_after_text(seconds: float) -> str:
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


def error_body(status: int, message: str | None = None, code: str | None = None) -> dict[str, Any]:
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
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def route(target: str) -> str:
    """A request target's path, without its query or a leading ``/v1``."""
    path = target.split("?", 1)[0]
    if path == "/v1" or path.startswith("/v1/"):
        path = path[len("/v1") :]
    return path.rstrip("/") or "/"


def parse_json(raw: bytes) -> Any:
    """A body's JSON, or None when it is empty or not JSON."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


async def wait_alive(
    writer: asyncio.StreamWriter, seconds: float | None, interval_ms: float | None
) -> None:
    """Wait ``seconds`` (None: until cancelled, when the client leaves), sending a
    keep-alive comment every ``interval_ms`` meanwhile, when given."""
    loop = asyncio.get_running_loop()
    until = None if seconds is None else loop.time() + seconds
    every = None if interval_ms is None else interval_ms / 1000
    while True:
        left = None if until is None else until - loop.time()
        if left is not None and left <= 0:
            return
        if every is None and left is None:
            await asyncio.Event().wait()
        if every is None:
            await asyncio.sleep(left or 0)
            return
        await asyncio.sleep(every if left is None else min(every, left))
        if until is None or loop.time() < until:
            writer.write(chunk(KEEPALIVE_COMMENT))
            await writer.drain()
