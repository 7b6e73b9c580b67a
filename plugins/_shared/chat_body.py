"""The response body, read: every read bounded, events read a batch at a time.

:class:`ResponseBody` reads a streamed HTTP body piece by piece within a silence bound
(and the end's grace once the answer has finished); :func:`sse_lines` cuts it into SSE
lines, pausing :data:`READ_PAUSE_S` after a trickle; :func:`not_an_event_stream` says
what a 200 that is not an event stream holds.

Part of the chat-completions library (see :mod:`dsh_plugins._shared.chat_completions`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

if "httpx" not in sys.modules:
    # httpx imports its command-line client (rich, click and pygments: ~80 ms, a sixth
    # of a headless start) whenever they are installed, and dsh's UIs install rich. A
    # module marked absent is skipped, as httpx does when they are missing. httpx
    # itself is imported at the first request (see chat_adapter).
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from dsh.control_chars import visible
from dsh.llm.sse import SseLines

READ_PAUSE_S = 0.025
"""How long a stream that has caught up with the server waits before it reads again:
many tokens' time for a fast model, too short for anyone to notice."""
_WAITED_S = 0.0005
BACKLOG = 16 * 1024
"""Bytes read without waiting that make a backlog rather than a trickle."""

END_GRACE_S = 2.0
"""How long a stream that has said how it finished (a ``finish_reason``, or
``[DONE]``) may take to send the rest (usage, ``[DONE]``, the end of the body): a
server sends them at once, so a stream still open after this has forgotten to end.
Keep-alive comments do not extend it."""
_DRAIN_LIMIT = 64 * 1024
"""Bytes read after ``[DONE]`` to reach the end of the body; a server sending more
has its connection closed instead."""
_SNIFF_LIMIT = 2048
"""Bytes of a body that is not an event stream read to say what it is."""
_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")


class Silence(Exception):
    """A read of the body waited out its bound."""


class ResponseBody:
    """A response body read piece by piece, no read waiting longer than ``idle_s``, nor
    past ``until`` once that is set (the grace of a stream that has finished)."""

    def __init__(self, response: Any, idle_s: float) -> None:
        self._pieces: AsyncIterator[bytes] = response.aiter_bytes()
        self.idle_s = idle_s
        self.until: float | None = None
        self._ahead: list[bytes] = []
        self.ended = False

    def push_back(self, piece: bytes) -> None:
        if piece:
            self._ahead.append(piece)

    async def read(self) -> bytes | None:
        """The next piece, or None at the end of the body. Raises :class:`Silence`."""
        if self._ahead:
            return self._ahead.pop(0)
        if self.ended:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.idle_s
        if self.until is not None:
            deadline = min(deadline, self.until)
        try:
            async with asyncio.timeout_at(deadline):
                return await anext(self._pieces)
        except StopAsyncIteration:
            self.ended = True
            return None
        except TimeoutError:
            raise Silence from None

    def grace(self, seconds: float = END_GRACE_S) -> None:
        """From now on, read for ``seconds`` more at most."""
        if self.until is None:
            self.until = asyncio.get_running_loop().time() + seconds

    async def drain(self) -> bool:
        """Read to the end of the body within the grace, so that its connection can
        carry the next request; False when it did not end in time."""
        import httpx

        self.grace()
        read = 0
        while read <= _DRAIN_LIMIT:
            try:
                piece = await self.read()
            except (Silence, httpx.HTTPError):
                return False  # the connection is closed instead: the answer is whole
            if piece is None:
                return True
            read += len(piece)
        return False


async def sse_lines(
    body: ResponseBody,
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[str]:
    """The body's lines, cut as SSE cuts them (see :class:`SseLines`).

    A model streams hundreds of small events a second, and each read wakes the whole
    HTTP client and every consumer of the stream: read one event at a time, that was
    most of what a 500 tokens/s answer cost. So once a read has had to wait for the
    server after a trickle (less than :data:`BACKLOG` since the last wait), the next
    one waits :data:`READ_PAUSE_S` first, and reads what came meanwhile at once. After
    a backlog it does not: the server is ahead, and pausing would only hold it up."""
    lines = SseLines()
    since_wait = 0
    while True:
        asked = clock()
        piece = await body.read()
        if piece is None:
            break
        trickle = False
        if clock() - asked > _WAITED_S:
            trickle, since_wait = since_wait < BACKLOG, 0
        since_wait += len(piece)
        for line in lines.feed(piece):
            yield line
        if trickle:
            await pause(READ_PAUSE_S)
    for line in lines.end():
        yield line


async def not_an_event_stream(body: ResponseBody, content_type: str) -> str | None:
    """None when the body is an event stream (by its type, or by how it starts: some
    servers send one as another type); else what came instead, to show the person."""
    media = content_type.partition(";")[0].strip().lower()
    if media == "text/event-stream":
        return None
    head = b""
    while not head.strip() and len(head) < _SNIFF_LIMIT:
        piece = await body.read()
        if piece is None:
            break
        head += piece
    if head.lstrip().startswith(_SSE_STARTS):
        body.push_back(head)
        return None
    body.grace()  # enough of it to say what it is, not all of a slow page
    while len(head) < _SNIFF_LIMIT:
        try:
            piece = await body.read()
        except Silence:
            break
        if piece is None:
            break
        head += piece
    text = " ".join(head[:_SNIFF_LIMIT].decode("utf-8", errors="replace").split())
    shown = visible(text[:300] + ("…" if len(text) > 300 else ""), one_line=True)
    kind = media or "no content type"
    return f"{kind}, not an event stream: {shown}" if shown else f"{kind}, an empty body"
