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
from collections.abc import Callable
from pathlib import Path

from dsh.credentials import Secret
from dsh.kernel import Context
from plugins.mcp.config import ConfigError, ServerConfig, read_project_file
from plugins.mcp.connection import Connection, Register, Status


class McpService:
    def __init__(
        self,
        ctx: Context,
        servers: dict[str, ServerConfig],
        *,
        register: Register,
        lookup: Callable[[str], Secret | None],
        cwd: Path,
        project_file: Path | None,
        problems: list[str] | None = None,
    ) -> None:
        self.ctx = ctx
        self._servers = servers
        self._register = register
        self._lookup = lookup
        self._cwd = cwd
        self._project_file = project_file
        self.problems: list[str] = list(problems or [])
        """Configuration that could not be used, one line each."""
        self.connections: dict[str, Connection] = {}
        self._started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.ctx.spawn(self._start(), name="mcp:start")

    async def _start(self) -> None:
        servers = dict(self._servers)
        try:
            if self._project_file is not None:
                found = await asyncio.to_thread(read_project_file, self._project_file)
                for name, config in found.items():
                    servers.setdefault(name, config)  # the settings win by name
        except ConfigError as error:
            self.problems.append(str(error))
        finally:
            for name in sorted(servers):
                connection = Connection(
                    self.ctx.child(name=f"mcp:{name}"),
                    name,
                    servers[name],
                    register=self._register,
                    lookup=self._lookup,
                    cwd=self._cwd,
                )
                self.connections[name] = connection
                self._tasks.append(self.ctx.spawn(connection.run(), name=f"mcp:{name}"))
            self._started.set()

    async def settled(self) -> None:
        """Every server ready or failed (each bounded by its start-up timeout)."""
        await self._started.wait()
        await asyncio.gather(*(c.settled.wait() for c in self.connections.values()))

    def statuses(self) -> list[Status]:
        return [c.status() for c in self.connections.values()]

    async def aclose(self) -> None:
        for connection in self.connections.values():
            connection.stop()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
