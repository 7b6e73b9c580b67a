"""JSON-RPC 2.0 over a language server's stdio: ``Content-Length`` framing and the
bookkeeping of requests in flight.

Framing errors are fatal for a connection (after a bad header there is no telling
where the next message starts), so :func:`read_message` raises :class:`ProtocolError`
rather than guessing; the caller ends the server. Every request waits with a timeout
and, when it gives up or is cancelled, tells the server with ``$/cancelRequest``: a
caller never hangs on a server that stopped answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""A larger message is refused: no answer we use comes near it, and a bogus length
must not make us buffer gigabytes."""
MAX_HEADER_BYTES = 8 * 1024
OFFLOAD_BYTES = 256 * 1024
"""Bodies larger than this are parsed in a worker thread, off the event loop."""

METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

_log = logging.getLogger("dsh.plugins.lsp")


class ProtocolError(Exception):
    """The peer sent something that is not a framed JSON-RPC message."""


class ConnectionClosed(Exception):
    """No answer will come: the connection ended (the server exited or was stopped)."""


class RequestTimeout(Exception):
    """The server did not answer in time; the request was cancelled."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(f"{method} took longer than {seconds:g} s")
        self.method = method
        self.seconds = seconds


class ResponseError(Exception):
    """The server answered a request with an error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def encode(message: dict[str, Any]) -> bytes:
    """One framed message: the header, then the UTF-8 JSON body."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None when the stream ends cleanly between messages."""
    length: int | None = None
    seen = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as error:
            if seen == 0 and not error.partial:
                return None
            raise ProtocolError("the stream ended inside a message header") from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("a message header line is too long") from None
        seen += len(line)
        if seen > MAX_HEADER_BYTES:
            raise ProtocolError("the message header is too long")
        if line == b"\r\n":
            break
        name, colon, value = line[:-2].partition(b":")
        if not colon:
            raise ProtocolError(f"not a message header: {line[:60]!r}")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise ProtocolError(f"bad Content-Length: {value.strip()[:40]!r}") from None
    if length is None:
        raise ProtocolError("a message header without Content-Length")
    if length < 0 or length > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"a message of {length} bytes (the limit is {MAX_MESSAGE_BYTES})")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError("the stream ended inside a message body") from None
    try:
        if length > OFFLOAD_BYTES:
            message = await asyncio.to_thread(json.loads, body)
        else:
            message = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ProtocolError(f"a message body that is not UTF-8 JSON ({error})") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message that is not a JSON object")
    return message


def _again(reason: BaseException) -> BaseException:
    """A fresh copy of a stored failure, so each caller's traceback is its own."""
    if isinstance(reason, ProtocolError | ConnectionClosed):
        return type(reason)(*reason.args)
    return reason


RequestHandler = Callable[[str, Any], Any]
"""Answers a request from the server: returns the result, or raises ResponseError."""
NotificationHandler = Callable[[str, Any], None]


class Connection:
    """Requests and notifications over one reader/writer pair.

    ``run`` is the read loop (the owner runs it as a task); server requests are
    answered inline by ``on_request``, which must not block, so a slow handler can
    never hold up the answers the client is waiting for.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_request = on_request
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._write_lock = asyncio.Lock()
        self._closed: BaseException | None = None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def run(self) -> None:
        """Read and dispatch until the stream ends; a framing error raises ProtocolError
        (after failing every request in flight with it)."""
        try:
            while (message := await read_message(self._reader)) is not None:
                self._dispatch(message)
        except ProtocolError as error:
            self.close(error)
            raise
        self.close(ConnectionClosed("the server closed its output"))

    def close(self, reason: BaseException) -> None:
        """Fail every request in flight (and every later one) with ``reason``."""
        if self._closed is None:
            self._closed = reason
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(_again(reason))

    async def request(self, method: str, params: Any, seconds: float) -> Any:
        """Send a request and wait for its result, at most ``seconds``."""
        if self._closed is not None:
            raise _again(self._closed)
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            try:
                async with asyncio.timeout(seconds):
                    return await future
            except TimeoutError:
                raise RequestTimeout(method, seconds) from None
        finally:
            self._pending.pop(request_id, None)
            # Waiting on the future directly, a timeout or a cancelled call cancels it.
            gave_up = not future.done() or future.cancelled()
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved, even when it came as we were stopped
            if gave_up and self._closed is None:
                # The server may stop working on it.
                self._write_nowait(
                    {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}}
                )

    async def notify(self, method: str, params: Any) -> None:
        if self._closed is not None:
            raise _again(self._closed)
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # ------------------------------------------------------------------ internals

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._answer(message["id"], method, message.get("params"))
            else:
                try:
                    self._on_notification(method, message.get("params"))
                except Exception:
                    _log.exception("handling the server's %s notification failed", method)
            return
        request_id = message.get("id")
        future = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if future is None or future.done():
            return  # an answer to a request given up on
        error = message.get("error")
        if isinstance(error, dict):
            future.set_exception(
                ResponseError(
                    int(error.get("code", INTERNAL_ERROR)),
                    str(error.get("message", "")),
                    error.get("data"),
                )
            )
        else:
            future.set_result(message.get("result"))

    def _answer(self, request_id: Any, method: str, params: Any) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            reply["result"] = self._on_request(method, params)
        except ResponseError as error:
            reply["error"] = {"code": error.code, "message": error.message}
        except Exception as error:
            _log.exception("answering the server's %s request failed", method)
            reply["error"] = {"code": INTERNAL_ERROR, "message": str(error)}
        self._write_nowait(reply)

    async def _send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        async with self._write_lock:
            if self._writer.is_closing():
                raise _again(self._closed or ConnectionClosed("the server's input is closed"))
            try:
                self._writer.write(data)
                await self._writer.drain()
            except (ConnectionError, RuntimeError) as error:
                reason = self._closed or ConnectionClosed(f"writing to the server failed: {error}")
                raise _again(reason) from None

    def _write_nowait(self, message: dict[str, Any]) -> None:
        """Write without waiting for the pipe: small messages (answers, cancellations)
        sent from places that must not block, such as the read loop."""
        if self._writer.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._writer.write(encode(message))
