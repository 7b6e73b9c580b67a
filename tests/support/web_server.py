"""A tiny web server for web_fetch tests: fixed answers by path, every request kept.

It binds a loopback address (127.0.0.1, or another of 127/8 to stand for a second
host), answers one request per connection, and is used with ``async with``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html; charset=utf-8"),)


@dataclass
class PageServer:
    host: str = "127.0.0.1"
    pages: dict[str, Answer] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    """(method, path, headers with lower-case names) of every request, in order."""
    _server: asyncio.Server | None = None
    _port: int = 0

    async def __aenter__(self) -> PageServer:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    @property
    def port(self) -> int:
        return self._port

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        self.requests.append((method, path, headers))
        answer = self.pages.get(path, Answer(404, b"not here", (("Content-Type", "text/plain"),)))
        status_line = f"HTTP/1.1 {answer.status} X\r\n"
        fields = "".join(f"{k}: {v}\r\n" for k, v in answer.headers)
        fields += f"Content-Length: {len(answer.body)}\r\nConnection: close\r\n\r\n"
        writer.write((status_line + fields).encode("latin-1") + answer.body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
