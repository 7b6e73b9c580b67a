"""How dsh reaches a server: a stdio program (in the sandbox unless told otherwise),
Streamable HTTP or SSE, with OAuth for a remote server that asks for it.

Each function returns what the connection enters in its own task (the SDK's
transports are anyio code, entered and left in one task); :class:`Watched` tells the
connection when the server's side of a transport ends. Imports the SDK: loaded with
:mod:`dsh_plugins.mcp.connection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from dsh.credentials import Secret
from dsh.kernel import Context
from dsh.processes import helper_command
from dsh.sandbox import SandboxUnavailable, Wrapped
from dsh.services import SANDBOX
from dsh.tools import with_safe_git
from dsh_plugins.mcp.auth import DshOAuth, FileTokenStorage
from dsh_plugins.mcp.config import ServerConfig
from dsh_plugins.mcp.login import Login


class NotStarted(Exception):
    """The server's program cannot be started; the message says why."""


def server_cwd(config: ServerConfig, cwd: Path) -> Path:
    """The folder a stdio server runs in: its ``cwd``, relative to dsh's, else dsh's."""
    where = Path(config.cwd).expanduser() if config.cwd else cwd
    return where if where.is_absolute() else cwd / where


def find_program(config: ServerConfig, cwd: Path) -> str | None:
    """The server's program as a path, or None when there is none (a blocking look:
    run it in a thread)."""
    assert config.command is not None
    command = os.path.expanduser(config.command)
    if os.sep in command:
        path = Path(command) if os.path.isabs(command) else cwd / command
        return str(path) if os.access(path, os.X_OK) and path.is_file() else None
    return shutil.which(command)


async def stdio_command(
    ctx: Context,
    name: str,
    config: ServerConfig,
    env: dict[str, Secret],
    *,
    cwd: Path,
    own: bool,
) -> Wrapped:
    """The server's command line, inside the sandbox unless ``[sandbox]
    mcp_servers`` is false or the user's own table (``own``) says ``sandbox = false``.
    Raises :class:`NotStarted` when there is no program or the sandbox cannot start."""
    program = await asyncio.to_thread(find_program, config, cwd)
    if program is None:
        raise NotStarted(f"no program {config.command!r} found")
    argv = [program, *config.args]
    plain = with_safe_git({key: value.reveal() for key, value in env.items()})
    sandbox = ctx.get(SANDBOX, None)
    opted_out = own and not config.sandbox
    if sandbox is None or not sandbox.table.mcp_servers or opted_out:
        return Wrapped(argv, plain)
    try:
        # The SDK's spawn takes no preexec: a network of its own (none), not the
        # loopback the model's commands share.
        return await sandbox.wrap(
            argv, cwd=server_cwd(config, cwd), env=plain, shared_network=False
        )
    except SandboxUnavailable as error:
        raise NotStarted(
            f"not started: the sandbox cannot start ({error}); to run MCP servers "
            f"outside it, set `sandbox = false` in [mcp.servers.{name}] or "
            "`mcp_servers = false` in [sandbox] of your own settings"
        ) from None


def stdio_transport(config: ServerConfig, wrapped: Wrapped, errors: TextIO, cwd: Path) -> Any:
    """The SDK's stdio client for ``wrapped``, its stderr written to ``errors``."""
    # setpriv's parent-death signal: the server dies with dsh however dsh ends
    # (the SDK already puts it in a process group of its own and ends the group).
    argv, _ = helper_command(wrapped.argv)
    parameters = StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        env=wrapped.env,
        cwd=server_cwd(config, cwd),
    )
    return stdio_client(parameters, errlog=errors)


def http_transport(config: ServerConfig, headers: dict[str, str], auth: DshOAuth | None) -> Any:
    """The SDK's SSE or Streamable HTTP client for the server's URL."""
    assert config.url is not None
    if config.transport == "sse":
        return sse_client(config.url, headers=headers, auth=auth)
    client = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=config.tool_timeout),
        auth=auth,
    )
    return _owned_client(client, config.url)


def oauth(
    name: str,
    config: ServerConfig,
    headers: dict[str, str],
    login: Login | None,
    on_error: Callable[[Exception], None],
) -> DshOAuth | None:
    """OAuth through the SDK, unless the configuration sends its own credentials; only
    with a ``login`` (``dsh mcp login``) is a person taken through the browser."""
    if any(key.lower() == "authorization" for key in headers):
        return None
    assert config.url is not None
    storage = FileTokenStorage(name, config.url)
    if login is None:
        return DshOAuth(storage, on_error=on_error)
    return DshOAuth(
        storage,
        on_error=on_error,
        redirect=login.redirect,
        callback=login.callback,
        redirect_uri=login.redirect_uri,
    )


@contextlib.asynccontextmanager
async def _owned_client(client: httpx2.AsyncClient, url: str) -> Any:
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


class Watched:
    """A transport's read stream that says when it ends."""

    def __init__(self, stream: Any, ended: Callable[[], None]) -> None:
        self._stream = stream
        self._ended = ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)  # last_context and the like

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except StopAsyncIteration:
            self._ended()
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    async def __aenter__(self) -> Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()
