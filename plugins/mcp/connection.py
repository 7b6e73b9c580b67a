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
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import os
import shutil
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, types
from mcp.client._probe import negotiate_auto
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
    listen,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict

import dsh
from dsh.commands import CommandError
from dsh.credentials import Secret, redact
from dsh.kernel import Context
from dsh.llm import TextBlock, ToolSchema
from dsh.processes import helper_command
from dsh.sandbox import SandboxUnavailable, Wrapped
from dsh.services import SANDBOX
from dsh.tools import (
    Action,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    with_safe_git,
)
from dsh_plugins.mcp.auth import DshOAuth, FileTokenStorage, LoginRequired
from dsh_plugins.mcp.config import MissingVariable, ServerConfig, WithheldVariable, expand
from dsh_plugins.mcp.login import Login, LoginFailed
from dsh_plugins.mcp.prompts import PromptCall
from dsh_plugins.mcp.results import images_of, result_text
from dsh_plugins.mcp.schema import clean, normalise, tool_names
from dsh_plugins.mcp.status import Register, RegisterCommand, State, Status

STDERR_TAIL = 4096
"""Bytes of a server's stderr kept for its status."""
MAX_DESCRIPTION = 4000
MAX_BACKOFF_S = 30.0
MAX_RESOURCES = 1000
"""Resources of one server kept for ``@`` completion."""
_CLIENT = types.Implementation(name="dsh", version=dsh.__version__)


ListKind = Literal["tools", "prompts", "resources"]
_LISTS: dict[type, ListKind] = {
    # the notification of protocols up to 2025-11-25, then the 2026-07-28 event
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
    ToolsListChanged: "tools",
    PromptsListChanged: "prompts",
    ResourcesListChanged: "resources",
}


_Page = TypeVar("_Page", types.ListToolsResult, types.ListPromptsResult, types.ListResourcesResult)
_Item = TypeVar("_Item")


async def _every_page(
    list_page: Callable[..., Awaitable[_Page]],
    items: Callable[[_Page], list[_Item]],
    *,
    limit: int | None = None,
) -> list[_Item]:
    """Every item of a paginated list, following ``next_cursor`` to the last page (or
    the page that brings ``limit`` items)."""
    found: list[_Item] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await list_page(params=params)
        found.extend(items(page))
        cursor = page.next_cursor
        if not cursor or (limit is not None and len(found) >= limit):
            return found


class Arguments(BaseModel):
    """Whatever object the model sends: the server validates it against its schema."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class McpTool(ToolDefinition):
    """A server's tool: its schema is the server's, normalised, not a pydantic model's."""

    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, parameters=self.parameters)


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
        self._tail = b""
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
        tail = redact(self._tail.decode("utf-8", errors="replace"), *self._secrets)
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
                        program = await asyncio.to_thread(self._program)
                        if program is None:
                            self._fail(f"no program {self.config.command!r} found")
                            return
                        wrapped = await self._contain(program, env)
                        if wrapped is None:
                            return
                        errors, reader = self._stderr_pipe()
                        streams = await stack.enter_async_context(self._stdio(wrapped, errors))
                        errors.close()  # the child holds its copy
                    else:
                        streams = await stack.enter_async_context(self._http(headers))
                    session = await stack.enter_async_context(
                        ClientSession(
                            _Watched(streams[0], self._ended),
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
                    self._list_changed(_LISTS.get(type(event)))
        except Exception:  # no live updates from this server; its lists stay as they are
            return

    def _list_changed(self, kind: ListKind | None) -> None:
        if kind is not None:
            self._changed.add(kind)
            self._wake.set()

    async def _list(self, session: ClientSession) -> None:
        tools = await _every_page(session.list_tools, lambda page: page.tools)
        self._swap(self._chosen(tools))

    async def _prompts(self, session: ClientSession) -> None:
        capabilities = session.server_capabilities
        if self._register_command is None or capabilities is None or not capabilities.prompts:
            return
        try:
            prompts = await _every_page(session.list_prompts, lambda page: page.prompts)
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
                found = await _every_page(
                    session.list_resources, lambda page: page.resources, limit=MAX_RESOURCES
                )
            except Exception:  # the tools matter; a resource list that fails is none
                return
            self.resources = found[:MAX_RESOURCES]

    def _chosen(self, tools: list[types.Tool]) -> list[types.Tool]:
        include, exclude = self.config.include_tools, self.config.exclude_tools
        return [
            tool
            for tool in tools
            if (include is None or any(fnmatch.fnmatchcase(tool.name, p) for p in include))
            and not any(fnmatch.fnmatchcase(tool.name, p) for p in exclude)
        ]

    def _swap(self, tools: list[types.Tool]) -> None:
        self._unregister_all()
        names = tool_names(self.name, [tool.name for tool in tools])
        by_name = {tool.name: tool for tool in tools}
        for original, name in names.items():
            definition = self._definition(name, by_name[original])
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
        self._list_changed(_LISTS.get(type(message)))

    # ---------------------------------------------------------------- transports

    async def _contain(self, program: str, env: dict[str, Secret]) -> Wrapped | None:
        """The server's command line, inside the sandbox unless ``[sandbox]
        mcp_servers`` is false or the user's own table says ``sandbox = false``; None
        (and the server failed, saying why) when the sandbox cannot start."""
        argv = [program, *self.config.args]
        plain = with_safe_git({key: value.reveal() for key, value in env.items()})
        sandbox = self.ctx.get(SANDBOX, None)
        opted_out = self._own and not self.config.sandbox
        if sandbox is None or not sandbox.table.mcp_servers or opted_out:
            return Wrapped(argv, plain)
        try:
            # The SDK's spawn takes no preexec: a network of its own (none), not the
            # loopback the model's commands share.
            return await sandbox.wrap(argv, cwd=self._server_cwd(), env=plain, shared_network=False)
        except SandboxUnavailable as error:
            self._fail(
                f"not started: the sandbox cannot start ({error}); to run MCP servers "
                f"outside it, set `sandbox = false` in [mcp.servers.{self.name}] or "
                "`mcp_servers = false` in [sandbox] of your own settings"
            )
            return None

    def _server_cwd(self) -> Path:
        cwd = Path(self.config.cwd).expanduser() if self.config.cwd else self._cwd
        return cwd if cwd.is_absolute() else self._cwd / cwd

    def _stdio(self, wrapped: Wrapped, errors: TextIO) -> Any:
        # setpriv's parent-death signal: the server dies with dsh however dsh ends
        # (the SDK already puts it in a process group of its own and ends the group).
        argv, _ = helper_command(wrapped.argv)
        parameters = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            env=wrapped.env,
            cwd=self._server_cwd(),
        )
        return stdio_client(parameters, errlog=errors)

    def _http(self, headers: dict[str, Secret]) -> Any:
        assert self.config.url is not None
        values = {key: value.reveal() for key, value in headers.items()}
        auth = self._oauth(values)
        if self.config.transport == "sse":
            return sse_client(self.config.url, headers=values, auth=auth)
        client = httpx2.AsyncClient(
            headers=values,
            timeout=httpx2.Timeout(30.0, read=self.config.tool_timeout),
            auth=auth,
        )
        return _owned_client(client, self.config.url)

    def _oauth(self, headers: dict[str, str]) -> DshOAuth | None:
        """OAuth through the SDK, unless the configuration sends its own credentials."""
        if any(key.lower() == "authorization" for key in headers):
            return None
        assert self.config.url is not None
        storage = FileTokenStorage(self.name, self.config.url)
        login = self._login
        if login is None:
            return DshOAuth(storage, on_error=self._auth_failed)
        return DshOAuth(
            storage,
            on_error=self._auth_failed,
            redirect=login.redirect,
            callback=login.callback,
            redirect_uri=login.redirect_uri,
        )

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

    def _program(self) -> str | None:
        assert self.config.command is not None
        command = os.path.expanduser(self.config.command)
        if os.sep in command:
            path = Path(command) if os.path.isabs(command) else self._cwd / command
            return str(path) if os.access(path, os.X_OK) and path.is_file() else None
        return shutil.which(command)

    def _stderr_pipe(self) -> tuple[TextIO, asyncio.Task[None]]:
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, True)
        reader = self.ctx.spawn(self._read_stderr(read_end), name=f"mcp:{self.name}:stderr")
        return os.fdopen(write_end, "w"), reader

    async def _read_stderr(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader()
        pipe = os.fdopen(fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), pipe
        )
        try:
            while chunk := await stream.read(4096):
                self._tail = (self._tail + chunk)[-STDERR_TAIL:]
        finally:
            transport.close()

    # ---------------------------------------------------------------- tools

    def _definition(self, name: str, tool: types.Tool) -> McpTool:
        hints = tool.annotations
        read_only = bool(hints and hints.read_only_hint)
        destructive = bool(hints and hints.destructive_hint) and not read_only
        description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION]
        server, original = self.name, tool.name

        def describe(arguments: Any, context: ToolContext) -> Action:
            shown = json.dumps(_raw(arguments), ensure_ascii=False, sort_keys=True)
            summary = f"{server}: {original} {shown}"[:300]
            if read_only:
                return Action(risk="read", summary=summary)
            return Action(
                risk="external",
                summary=summary,
                details=f"MCP server {server}, tool {original}\narguments: {shown}",
                unchecked=(
                    f"the MCP server {server} marks {original} as destructive"
                    if destructive
                    else None
                ),
            )

        async def execute(arguments: Any, context: ToolContext) -> ToolOutput:
            return await self.call(original, _raw(arguments), context)

        return McpTool(
            name=name,
            description=f"{description}\n\n(MCP server {server}, tool {original})",
            arguments=Arguments,
            execute=execute,
            read_only=read_only,
            kind="read" if read_only else "other",
            describe=describe,
            timeout_s=self.config.tool_timeout,
            parameters=normalise(tool.input_schema),
        )

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
        images, fate = await images_of(result, context, f"{clean(self.name)}-{clean(tool)}")
        text = result_text(result, fate)
        if not images:
            return ToolOutput(content=text, is_error=bool(result.is_error))
        return ToolOutput(content=(TextBlock(text=text), *images), is_error=bool(result.is_error))


def _raw(arguments: Any) -> dict[str, Any]:
    return arguments.model_dump() if isinstance(arguments, BaseModel) else dict(arguments)


def _describe(error: BaseException) -> str:
    if isinstance(error, MCPError):
        return error.error.message
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


@contextlib.asynccontextmanager
async def _owned_client(client: httpx2.AsyncClient, url: str) -> Any:
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


class _Watched:
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

    def __aiter__(self) -> _Watched:
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

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()
