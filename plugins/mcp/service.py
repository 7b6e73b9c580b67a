"""All configured servers: started together in the background, each on its own.

:meth:`McpService.start` reads the configuration (a trusted project's ``.mcp.json``
in a thread) and starts every enabled server in a task of its own, in parallel; it
never waits for them. :meth:`settled` is what a front end that must not send a
request before the tools are known (``dsh -p``) awaits: every server ready or failed,
each bounded by its ``startup_timeout``. :meth:`aclose` asks each to stop and waits
for its transport to close (the SDK ends a stdio server's process group).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh.control_chars import visible
from dsh.credentials import Secret
from dsh.frontend import ToolServer
from dsh.kernel import Context, ServiceKey
from dsh_plugins.mcp.config import ConfigError, ServerConfig, client_config, read_project_file
from dsh_plugins.mcp.status import Register, RegisterCommand, Status

if TYPE_CHECKING:
    from dsh_plugins.mcp.connection import Connection
    from dsh_plugins.mcp.login import Login


CONNECTION_MODULE = "dsh_plugins.mcp.connection"


class McpService:
    def __init__(
        self,
        ctx: Context,
        servers: dict[str, ServerConfig],
        *,
        register: Register,
        register_command: RegisterCommand | None = None,
        lookup: Callable[[str], Secret | None],
        cwd: Path,
        project_file: Path | None,
        project_lookup: Callable[[str], Secret | None] | None = None,
        own: set[str] | None = None,
        ignored_file: Path | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.ctx = ctx
        self._servers = servers
        self._register = register
        self._register_command = register_command
        self._lookup = lookup
        self._project_lookup = project_lookup
        self._own = set(own) if own is not None else set(servers)
        """The servers the user's own settings (or the client) configure: only these
        may name the user's credentials; every other one uses ``project_lookup``."""
        self._cwd = cwd
        self._project_file = project_file
        self._ignored_file = ignored_file
        self.problems: list[str] = list(problems or [])
        """Configuration that could not be used, one line each."""
        self.connections: dict[str, Connection] = {}
        self._started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._offered: set[str] = set()

    def start(self) -> None:
        self.ctx.spawn(self._start(), name="mcp:start")

    async def _start(self) -> None:
        servers = dict(self._servers)
        try:
            ignored = self._ignored_file
            if ignored is not None and await asyncio.to_thread(ignored.is_file):
                self.problems.append(
                    f"{ignored} not used: this folder is not trusted (`dsh trust` uses it)"
                )
            if self._project_file is not None:
                found = await asyncio.to_thread(read_project_file, self._project_file)
                for name, config in found.items():
                    servers.setdefault(name, config)  # the settings win by name
        except ConfigError as error:
            self.problems.append(str(error))
        finally:
            if servers:
                # The SDK is imported here, in a thread, and only when there are servers.
                module = await asyncio.to_thread(importlib.import_module, CONNECTION_MODULE)
            for name in sorted(servers):
                self._connect(module, name, servers[name])
            self._started.set()

    async def started(self) -> None:
        """Every server's configuration read (a project's ``.mcp.json`` too)."""
        await self._started.wait()

    def _connect(self, module: Any, name: str, config: ServerConfig) -> None:
        connection = self._connection(module, name, config)
        self.connections[name] = connection
        self._tasks.append(self.ctx.spawn(connection.run(), name=f"mcp:{name}"))

    async def offer(self, servers: Sequence[ToolServer]) -> None:
        """Start the servers a front end's client offers (an editor's), each once. A
        name the configuration has already keeps the configured server."""
        await self._started.wait()
        fresh = [server for server in servers if server.name not in self._offered]
        if not fresh:
            return
        module = await asyncio.to_thread(importlib.import_module, CONNECTION_MODULE)
        for server in fresh:
            self._offered.add(server.name)
            if server.name in self.connections:
                self.problems.append(
                    f"the client's server {server.name} not started: a configured one has its name"
                )
                continue
            try:
                config = client_config(server)
            except ValueError as error:
                self.problems.append(f"the client's server {server.name}: {error}")
                continue
            self._own.add(server.name)  # the editor's own configuration: the user's
            self._connect(module, server.name, config)

    async def settled(self) -> None:
        """Every server ready or failed (each bounded by its start-up timeout)."""
        await self._started.wait()
        await asyncio.gather(*(c.settled.wait() for c in self.connections.values()))

    def statuses(self) -> list[Status]:
        return [c.status() for c in self.connections.values()]

    def _connection(
        self, module: Any, name: str, config: ServerConfig, login: Login | None = None
    ) -> Connection:
        """A connection to server ``name`` in a context of its own (not yet running)."""
        connection: Connection = module.Connection(
            self.ctx.child(name=f"mcp:{name}"),
            name,
            config,
            register=self._register,
            register_command=self._register_command,
            lookup=self._lookup if name in self._own else self._withheld_lookup,
            cwd=self._cwd,
            login=login,
            own=name in self._own,
        )
        return connection

    def _withheld_lookup(self, name: str) -> Secret | None:
        if self._project_lookup is None:
            return self._lookup(name)
        return self._project_lookup(name)

    def restart(self, name: str) -> bool:
        """Start server ``name`` again (after a failure, or to pick up a change of its
        own); False when there is no such server."""
        return self._replace(name) is not None

    def login(self, name: str, login: Login) -> Connection | None:
        """Start server ``name`` again, this time taking a person through its login
        when it asks for one (``dsh mcp login``); None when there is no such server."""
        return self._replace(name, login)

    def _replace(self, name: str, login: Login | None = None) -> Connection | None:
        old = self.connections.get(name)
        if old is None:
            return None
        old.stop()
        module = importlib.import_module(CONNECTION_MODULE)  # imported for the old one
        config = old.config.model_copy(update={"enabled": True})
        connection = self._connection(module, name, config, login)

        async def replace() -> None:
            await old.settled.wait()
            await old.finished.wait()
            await old.ctx.dispose()  # what the old one still owned (its stderr reader)
            await connection.run()

        self.connections[name] = connection
        self._tasks = [task for task in self._tasks if not task.done()]
        self._tasks.append(self.ctx.spawn(replace(), name=f"mcp:{name}"))
        return connection

    async def aclose(self) -> None:
        for connection in self.connections.values():
            connection.stop()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def status_lines(service: McpService, *, tail_lines: int = 5) -> list[str]:
    """Each server's state, tools and last error, for ``/mcp`` and ``dsh -p``'s stderr;
    every text from a server shown through :func:`dsh.control_chars.visible`."""
    lines = [visible(problem, one_line=True) for problem in service.problems]
    for status in service.statuses():
        head = f"{status.name}: {status.state}"
        if status.state == "ready":
            head += f", {len(status.tools)} tool{'s' if len(status.tools) != 1 else ''}"
        lines.append(f"{head} ({visible(status.where, one_line=True)})")
        if status.reason:
            lines.append(f"  {visible(status.reason, one_line=True)}")
        if status.stderr and status.state == "failed":
            for line in status.stderr.splitlines()[-tail_lines:]:
                lines.append(f"  stderr: {visible(line, one_line=True)}")
    return lines or ["No MCP servers are configured ([mcp.servers.NAME] in settings)."]


MCP: ServiceKey[McpService] = ServiceKey("mcp")
"""The plugin's service: the servers, their states, ``restart``."""
