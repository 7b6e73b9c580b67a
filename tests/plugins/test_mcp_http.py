"""The mcp plugin over HTTP: the fixture server (tests/fixtures/mcp/server.py) as a
legacy SSE and a Streamable HTTP server on 127.0.0.1, and one that is not there.

Every wait is bounded by HANG_S (a hang guard, never a timing assertion).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.plugins.mcp_support import FIXTURE, PY, call, service_of, started
from tests.support.waits import HANG_S


@contextlib.asynccontextmanager
async def served(transport: str, path: str) -> AsyncIterator[str]:
    child = await asyncio.create_subprocess_exec(
        PY,
        str(FIXTURE),
        transport,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), HANG_S)
        port = int(line.decode().split()[1])
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        child.kill()
        await asyncio.wait_for(child.wait(), HANG_S)


@pytest_asyncio.fixture
async def http_server() -> AsyncIterator[str]:
    async with served("http", "/mcp") as url:
        yield url


async def test_a_legacy_sse_server(tmp_path: Path) -> None:
    async with served("sse", "/sse") as url:
        runtime = await started(tmp_path, f'[mcp.servers.old]\ntype = "sse"\nurl = "{url}"\n')
        try:
            await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
            [status] = service_of(runtime).statuses()
            assert status.state == "ready", status
            text, _ = await call(runtime, tmp_path, "mcp__old__echo", {"text": "over sse"})
            assert text == "echo: over sse"
        finally:
            await runtime.aclose()


async def test_a_streamable_http_server(tmp_path: Path, http_server: str) -> None:
    runtime = await started(
        tmp_path,
        f'[mcp.servers.remote]\nurl = "{http_server}"\nheaders = {{ X-Test = "yes" }}\n',
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.state == "ready", status
        text, _ = await call(runtime, tmp_path, "mcp__remote__echo", {"text": "over http"})
        assert text == "echo: over http"
        progress: list[str] = []
        text, _ = await call(
            runtime, tmp_path, "mcp__remote__slow", {"steps": 1}, progress=progress
        )
        assert (text, progress) == ("done after 1 steps", ["step 1 (1/1)"])
    finally:
        await runtime.aclose()


async def test_an_http_server_that_is_not_there(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    runtime = await started(
        tmp_path, f'[mcp.servers.gone]\nurl = "http://127.0.0.1:{port}/mcp"\nstartup_timeout = 20\n'
    )
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert status.state == "failed"
        assert status.reason
    finally:
        await runtime.aclose()
