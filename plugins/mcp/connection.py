"""One MCP server: its connection, its state, its tools.

A :class:`Connection` runs in one task its context owns (:meth:`run`): it starts the
transport (the SDK's stdio, Streamable HTTP or SSE client), opens a
``ClientSession``, and within ``startup_timeout`` agrees on a protocol version,
lists the tools and prompts; then it registers them, lists the resources (for ``@``
menus) and waits: for a list change (a ``list_changed`` notification, or an event on
the ``subscriptions/listen`` stream of a 2026-07-28 server; that list is read again,
which the next step's request sees) or for the end. Whatever goes wrong (the program cannot start or exits, never answers, writes
something other than JSON-RPC on stdout, the URL refuses) ends in the ``failed``
state with a reason and the tail of the server's stderr, its tools gone; nothing of
it reaches the rest of dsh. A remote server that answers 401 ends in ``needs login``
(:mod:`dsh_plugins.mcp.auth`): only a connection ``dsh mcp login`` starts with a
:class:`~plugins.mcp.login.Login` takes a person through the browser.

The SDK's session and transports are anyio code: they are entered and left in this
one task, inside a cancel scope the connection cancels to give up (a garbage line
arrives as an exception in the message handler, on another task).

This module is the lifecycle; the rest is beside it: :mod:`~dsh_plugins.mcp.transports`
(how the server is reached), :mod:`~dsh_plugins.mcp.stderr` (its stderr's tail),
:mod:`~dsh_plugins.mcp.catalogue` (its lists, read whole, and their changes) and
:mod:`~dsh_plugins.mcp.tool_adapter` (its tools as dsh tools).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import ClientSession, types
from mcp.client._probe import negotiate_auto
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import dsh
from dsh.commands import CommandError
from dsh.credentials import Secret, redact
from dsh.kernel import Context
from dsh.tools import ToolContext, ToolError, ToolOutput
from dsh_plugins.mcp.auth import DshOAuth, LoginRequired
from dsh_plugins.mcp.catalogue import LIST_CHANGES, ListKind, chosen, every_page
from dsh_plugins.mcp.config import MissingVariable, ServerConfig, WithheldVariable, expand
from dsh_plugins.mcp.login import Login, LoginFailed
from dsh_plugins.mcp.prompts import PromptCall
from dsh_plugins.mcp.schema import tool_names
from dsh_plugins.mcp.status import Register, RegisterCommand, State, Status
from dsh_plugins.mcp.stderr import StderrTail
from dsh_plugins.mcp.tool_adapter import mcp_tool, tool_output
from dsh_plugins.mcp.transports import (
    NotStarted,
    Watched,
    http_transport,
    oauth,
    stdio_command,
    stdio_transport,
)

MAX_BACKOFF_S = 30.0
MAX_RESOURCES = 1000
"""Resources of one server kept for ``@`` completion."""
_CLIENT = types.Implementation(name="dsh", version=dsh.__version__)


class Connection:
    def __init__(
        self,
        ctx: Context,
        name: str,
        config: ServerConfig,
        *,
        register: Register,
        lookup: Callable[[str], Secret | None],
        cwd: Path,
        register_command: RegisterCommand | None = None,
        login: Login | None = None,
        own: bool = False,
    ) -> None:
        self.ctx = ctx
        self._own = own
        """Configured as it runs by the user's own settings (or the editor's): only
        then may its ``sandbox = false`` start it outside the sandbox."""
        self._login = login
        self._register_command = register_command
        self.name = name
        self.config = config
        self._register = register
        self._lookup = lookup
        self._cwd = cwd
        self.state: State = "starting" if config.enabled else "disabled"
        self.reason: str | None = None
        self.settled = asyncio.Event()
        """Set once the server is ready or failed (or will not start)."""
        self.finished = asyncio.Event()
        """Set once its task has ended and its tools are gone."""
        self.session: ClientSession | None = None
        self._stderr = StderrTail()
        self._secrets: list[Secret] = []
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        self._stopping = False
        self._was_ready = False
        self._changed: set[ListKind] = set()
        self._scope: anyio.CancelScope | None = None
        self._registered: dict[str, Callable[[], object]] = {}
        self._commands: dict[str, Callable[[], object]] = {}
        self.prompts: dict[str, PromptCall] = {}
        """The server's prompts by command name."""
        self.resources: list[types.Resource] = []
        """The server's resources (the first :data:`MAX_RESOURCES`), for ``@`` menus."""
        if not config.enabled:
            self.settled.set()
            self.finished.set()

    # ---------------------------------------------------------------- status

    def status(self) -> Status:
        tail = redact(self._stderr.text(), *self._secrets)
        return Status(
            name=self.name,
            where=self.config.shown(),
            state=self.state,
            reason=self.reason,
            stderr=tail.strip(),
            tools=sorted(self._registered),
        )

    def _fail(self, reason: str) -> None:
        if self.state in ("starting", "ready"):
            self.state = "failed"
            self.reason = redact(reason, *self._secrets)
            # Gone with the state, not once the connection has unwound: a step that
            # starts meanwhile must not offer them.
            self._unregister_all()
            self._unregister_commands()
            self.resources = []
        if self._scope is not None:
            self._scope.cancel()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._stopped.set()
        if self.state == "starting" and self._scope is not None:
            self._scope.cancel()  # not worth waiting out its start-up

    # ---------------------------------------------------------------- the task

    async def run(self) -> None:
        if not self.config.enabled:
            return
        attempt = 0
        try:
            while True:
                await self._once()
                if self._stopping or not self._was_ready or self.state == "needs login":
                    return  # a server that never came up is not retried on its own
                if attempt >= self.config.reconnect_attempts:
                    return
                attempt += 1
                delay = min(2.0 ** (attempt - 1), MAX_BACKOFF_S)
                self.reason = f"{self.reason}; reconnecting in {delay:g} s"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), delay)
                if self._stopping:
                    return
                self.state, self.reason = "starting", None
                self._changed.clear()
                self._wake.clear()
        finally:
            self.finished.set()

    async def _once(self) -> None:
        self._was_ready = False
        try:
            await self._serve()
        except Exception as error:  # whatever a server does, dsh goes on
            reason = _describe(error)
            if self.state == "starting" and reason == "Connection closed":
                reason = "the server closed the connection before it was ready (it exited?)"
            self._fail(reason)
        finally:
            self._unregister_all()
            self._unregister_commands()
            self.resources = []
            self.session = None
            if self.state in ("starting", "ready"):
                self.state = "stopped" if self._stopping else "failed"
                if self.state == "failed" and self.reason is None:
                    self.reason = "the connection closed"
            self.settled.set()

    async def _serve(self) -> None:
        try:
            env = await asyncio.to_thread(expand, self.config.env, self._lookup)
            headers = await asyncio.to_thread(expand, self.config.headers, self._lookup)
        except MissingVariable as missing:
            self._fail(f"{missing}: set it in the environment or `dsh config`")
            return
        except WithheldVariable as withheld:
            self._fail(str(withheld))
            return
        self._secrets = [*env.values(), *headers.values()]
        errors: TextIO | None = None
        reader: asyncio.Task[None] | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                async with AsyncExitStack() as stack:
                    if self.config.transport == "stdio":
                        try:
                            wrapped = await stdio_command(
                                self.ctx, self.name, self.config, env, cwd=self._cwd, own=self._own
                            )
                        except NotStarted as refused:
                            self._fail(str(refused))
                            return
                        errors, reader = self._stderr.pipe(self.ctx, self.name)
                        streams = await stack.enter_async_context(
                            stdio_transport(self.config, wrapped, errors, self._cwd)
                        )
                        errors.close()  # the child holds its copy
                    else:
                        streams = await stack.enter_async_context(self._http(headers))
                    session = await stack.enter_async_context(
                        ClientSession(
                            Watched(streams[0], self._ended),
                            streams[1],
                            message_handler=self._on_message,
                            client_info=_CLIENT,
                        )
                    )
                    await self._start(session)
                    if self.state != "ready":
                        return
                    async with anyio.create_task_group() as group:
                        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            group.start_soon(self._listen, session)
                        group.start_soon(self._resources, session)  # not worth a wait
                        await self._wait(session)
                        group.cancel_scope.cancel()
            finally:
                self._scope = None
                if errors is not None and not errors.closed:
                    errors.close()
                if reader is not None:
                    if self.state == "failed":
                        # Its last words: read what the pipe still holds, briefly.
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(asyncio.shield(reader), 0.5)
                    reader.cancel()

    async def _start(self, session: ClientSession) -> None:
        timeout = self.config.startup_timeout
        if self._login is not None:
            timeout += self._login.wait_s  # a person is at the browser meanwhile
        with anyio.move_on_after(timeout) as waited:
            # The SDK Client's own default (mode="auto"): server/discover at the
            # newest version, initialize for a server that does not know it (one that
            # ignores it costs up to 10 s). A private module of the SDK, pinned by
            # mcp<3 and covered by tests with a server of each era.
            await negotiate_auto(session)
            await self._list(session)
            await self._prompts(session)
        if waited.cancelled_caught:
            self._fail(f"no answer to initialize within {timeout:g} s")
            return
        if self.state == "starting":
            self.session = session
            self.state = "ready"
            self._was_ready = True
            self.settled.set()

    async def _wait(self, session: ClientSession) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            changed, self._changed = self._changed, set()
            if "tools" in changed:
                try:
                    with anyio.fail_after(self.config.startup_timeout):
                        await self._list(session)
                except (TimeoutError, MCPError) as error:
                    self._fail(f"tools/list after list_changed failed: {_describe(error)}")
                    return
            # Prompts and resources are extras: failing to read them again leaves none.
            if "prompts" in changed:
                self._unregister_commands()
                with anyio.move_on_after(self.config.startup_timeout):
                    await self._prompts(session)
            if "resources" in changed:
                await self._resources(session)

    async def _listen(self, session: ClientSession) -> None:
        # From protocol 2026-07-28 on, list changes come only on a subscription the
        # client opens; earlier servers send the notification unasked (_on_message).
        capabilities = session.server_capabilities
        try:
            async with listen(
                session,
                tools_list_changed=True,
                prompts_list_changed=bool(capabilities and capabilities.prompts),
                resources_list_changed=bool(capabilities and capabilities.resources),
            ) as subscription:
                async for event in subscription:
                    self._list_changed(LIST_CHANGES.get(type(event)))
        except Exception:  # no live updates from this server; its lists stay as they are
            return

    def _list_changed(self, kind: ListKind | None) -> None:
        if kind is not None:
            self._changed.add(kind)
            self._wake.set()

    async def _list(self, session: ClientSession) -> None:
        tools = await every_page(session.list_tools, lambda page: page.tools)
        self._swap(chosen(tools, self.config.include_tools, self.config.exclude_tools))

    async def _prompts(self, session: ClientSession) -> None:
        capabilities = session.server_capabilities
        if self._register_command is None or capabilities is None or not capabilities.prompts:
            return
        try:
            prompts = await every_page(session.list_prompts, lambda page: page.prompts)
        except MCPError:
            return  # its tools are what matters; a server whose prompts fail has none

        async def get(name: str, arguments: dict[str, str]) -> types.GetPromptResult:
            if self.session is None:
                raise CommandError(f"the MCP server {self.name} is not running")
            try:
                with anyio.fail_after(self.config.tool_timeout):
                    result = await self.session.get_prompt(name, arguments)
            except MCPError as error:
                raise CommandError(f"{self.name}: {error.error.message}") from None
            if not isinstance(result, types.GetPromptResult):
                raise CommandError(f"{self.name}: {name} gave an answer dsh cannot read")
            return result

        for prompt in sorted(prompts, key=lambda p: p.name):
            call = PromptCall(self.name, prompt, get)
            if call.name not in self._commands:
                self.prompts[call.name] = call
                self._commands[call.name] = self._register_command(call.name, call.command())

    async def _resources(self, session: ClientSession) -> None:
        """The first resources, for ``@`` menus: none when the server lists none in
        time (``@server:uri`` still reads any of them)."""
        self.resources = []
        capabilities = session.server_capabilities
        if capabilities is None or not capabilities.resources:
            return
        with anyio.move_on_after(self.config.startup_timeout):
            try:
                found = await every_page(
                    session.list_resources, lambda page: page.resources, limit=MAX_RESOURCES
                )
            except Exception:  # the tools matter; a resource list that fails is none
                return
            self.resources = found[:MAX_RESOURCES]

    def _swap(self, tools: list[types.Tool]) -> None:
        self._unregister_all()
        names = tool_names(self.name, [tool.name for tool in tools])
        by_name = {tool.name: tool for tool in tools}
        for original, name in names.items():
            definition = mcp_tool(
                self.name,
                name,
                by_name[original],
                timeout_s=self.config.tool_timeout,
                call=self.call,
            )
            self._registered[name] = self._register(name, definition)

    def _unregister_all(self) -> None:
        registered, self._registered = self._registered, {}
        for dispose in registered.values():
            dispose()

    def _unregister_commands(self) -> None:
        self.prompts = {}
        commands, self._commands = self._commands, {}
        for dispose in commands.values():
            dispose()

    def _ended(self) -> None:
        # The server's side of the stream ended: it exited (or the HTTP stream broke).
        # Failed now, its tools gone, rather than at the next call.
        if not self._stopping:
            self._fail("the server closed the connection (it exited?)")

    # ---------------------------------------------------------------- messages

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            # A stdio server that prints anything but JSON-RPC on stdout cannot be
            # trusted to go on. Over HTTP one bad response (or a GET stream the server
            # does not offer) fails only its request; the read stream's end says more.
            if self.config.transport == "stdio":
                self._fail(f"the server sent something that is not MCP: {_describe(message)}")
            return
        self._list_changed(LIST_CHANGES.get(type(message)))

    # ---------------------------------------------------------------- transports

    def _http(self, headers: dict[str, Secret]) -> Any:
        values = {key: value.reveal() for key, value in headers.items()}
        return http_transport(self.config, values, self._oauth(values))

    def _oauth(self, headers: dict[str, str]) -> DshOAuth | None:
        return oauth(self.name, self.config, headers, self._login, self._auth_failed)

    def _auth_failed(self, error: Exception) -> None:
        # Raised inside the transport's request, which swallows it: the session would
        # wait out its start-up timeout for an answer that is not coming.
        if isinstance(error, LoginRequired):
            if self.state in ("starting", "ready"):
                self.state = "needs login"
                self.reason = f"run `dsh mcp login {self.name}`"
            if self._scope is not None:
                self._scope.cancel()
            return
        self._fail(
            f"login: {error}" if isinstance(error, LoginFailed) else f"OAuth: {_describe(error)}"
        )

    # ---------------------------------------------------------------- tools

    async def call(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        session = self.session
        if session is None or self.state != "ready":
            raise ToolError(
                f"the MCP server {self.name} is not running ({self.reason or self.state})",
                "MCP_UNAVAILABLE",
            )

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            shown = f"{progress:g}/{total:g}" if total else f"{progress:g}"
            context.progress(f"{message} ({shown})" if message else shown)

        try:
            result = await session.call_tool(tool, arguments, progress_callback=progress)
        except MCPError as error:
            raise ToolError(
                f"{self.name}: {redact(error.error.message, *self._secrets)}", "MCP_ERROR"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            self._fail("the connection closed during a call")
            raise ToolError(f"the MCP server {self.name} went away", "MCP_UNAVAILABLE") from None
        if not isinstance(result, types.CallToolResult):
            raise ToolError(f"{self.name}: {tool} gave an answer dsh cannot read", "MCP_ERROR")
        return await tool_output(self.name, tool, result, context)


def _describe(error: BaseException) -> str:
    if isinstance(error, MCPError):
        return error.error.message
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
