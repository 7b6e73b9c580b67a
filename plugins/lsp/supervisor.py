"""One language server for one workspace: started on first use, restarted after a
crash with backoff, given up on when it keeps failing.

A failure is a crash (the process exited unasked) or a start that did not reach
``initialized``. After ``n`` failures in a row the next start waits
``BACKOFF_BASE_S * 2**(n-1)`` seconds (at most ``BACKOFF_MAX_S``) from the last one: a
short wait is slept through, so a crash is transparent to the next call; a long one is
reported. ``MAX_FAILURES`` failures within ``FAILURE_WINDOW_S`` and no more starts are
tried until the oldest of them ages out. One successful answer resets the count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from dsh.kernel import Context
from dsh.tools import ToolError
from dsh_plugins.lsp.server import LanguageServer
from dsh_plugins.lsp.servers import ServerSpec

BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
MAX_INLINE_WAIT_S = 5.0
"""A restart due sooner than this is waited for inside the call; a later one is reported."""
MAX_FAILURES = 5
FAILURE_WINDOW_S = 600.0


class Supervisor:
    """Owns the current :class:`LanguageServer` for (``name``, ``root``)."""

    def __init__(
        self,
        name: str,
        root: Path,
        ctx: Context,
        *,
        spec: Callable[[], ServerSpec],
        timeout: float,
        max_documents: int,
    ) -> None:
        self.name = name
        self.root = root
        self._ctx = ctx
        self._spec = spec
        self._timeout = timeout
        self._max_documents = max_documents
        self._server: LanguageServer | None = None
        self._failures: list[float] = []
        self._last_error = ""
        self._lock = asyncio.Lock()
        self._closed = False
        self.starts = 0
        """Processes started so far (restarts included)."""

    @property
    def server(self) -> LanguageServer | None:
        """The server if it is running now; never starts one."""
        server = self._server
        return server if server is not None and server.alive else None

    async def get(self) -> LanguageServer:
        """The running server, started (or restarted) if need be."""
        async with self._lock:
            if self._closed:
                raise ToolError("the lsp plugin is shutting down.", "LSP_UNAVAILABLE")
            server = self._server
            if server is not None and server.alive:
                return server
            if server is not None:
                self._server = None
                await server.stop(grace=0)
            await self._backoff()
            spec = await asyncio.to_thread(self._spec)  # LSP_UNAVAILABLE: not a failure
            server = LanguageServer(
                spec,
                self.root,
                self._ctx.child(name=f"lsp:{self.name}"),
                timeout=self._timeout,
                max_documents=self._max_documents,
                on_exit=self._crashed,
                on_answer=self._healthy,
            )
            self.starts += 1
            try:
                await server.start()
            except ToolError as error:
                self._failed(error.message)
                raise
            self._server = server
            return server

    async def aclose(self) -> None:
        """Stop the server, if one runs, and refuse to start another."""
        self._closed = True
        server, self._server = self._server, None
        if server is not None:
            await server.stop()

    def _healthy(self) -> None:
        self._failures = []

    def _crashed(self, server: LanguageServer) -> None:
        if server is self._server:
            self._failed(server.exit_description())

    def _failed(self, reason: str) -> None:
        self._failures.append(time.monotonic())
        self._last_error = reason

    async def _backoff(self) -> None:
        now = time.monotonic()
        self._failures = [t for t in self._failures if now - t < FAILURE_WINDOW_S]
        count = len(self._failures)
        if count == 0:
            return
        label = f"the {self.name} language server"
        if count >= MAX_FAILURES:
            retry = self._failures[0] + FAILURE_WINDOW_S - now
            raise ToolError(
                f"{label} failed {count} times in a row, so dsh stopped restarting it for "
                f"{retry / 60:.0f} min. Last failure: {self._last_error}. Check the server "
                "and its settings ([plugins.lsp.servers]).",
                "LSP_SERVER_CRASHED",
            )
        delay = min(BACKOFF_BASE_S * 2 ** (count - 1), BACKOFF_MAX_S)
        wait = self._failures[-1] + delay - now
        if wait <= 0:
            return
        if wait > MAX_INLINE_WAIT_S:
            raise ToolError(
                f"{label} failed {count} times in a row; it will be started again in "
                f"{wait:.0f} s. Last failure: {self._last_error}",
                "LSP_SERVER_CRASHED",
            )
        await asyncio.sleep(wait)
