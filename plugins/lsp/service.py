"""The ``lsp`` service: the language servers of this process, one per (server,
workspace), each started on first use, and the documents they were shown kept in step
with the disk.

Other plugins and UIs may use it (``ctx.get(LSP)``, the key in :mod:`dsh_plugins.lsp`): :meth:`LspService.server`
starts or returns a server, :meth:`LspService.open` shows it a file,
:meth:`LspService.status` lists what runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from dsh.kernel import Context
from dsh.tools import ToolError
from dsh_plugins.lsp.config import Config
from dsh_plugins.lsp.files import Source, current_stamp, find_workspace, read_source
from dsh_plugins.lsp.server import LanguageServer
from dsh_plugins.lsp.servers import Catalog
from dsh_plugins.lsp.supervisor import Supervisor

_log = logging.getLogger("dsh.plugins.lsp")


@dataclass(frozen=True)
class ServerStatus:
    name: str
    root: Path
    running: bool
    pid: int | None
    starts: int
    """Processes started (a restart after a crash counts)."""
    open_documents: int


class LspService:
    def __init__(self, ctx: Context, config: Config) -> None:
        self.config = config
        self.catalog = Catalog(config.servers)
        self._ctx = ctx
        self._supervisors: dict[tuple[str, Path], Supervisor] = {}
        self._workspaces: dict[Path, Path] = {}
        self._starting: dict[tuple[str, Path], asyncio.Task[LanguageServer | None]] = {}
        self._closed = False

    async def workspace(self, cwd: Path) -> Path:
        """The folder servers for a session in ``cwd`` work on (see ``Config.workspace``)."""
        found = self._workspaces.get(cwd)
        if found is None:
            use_git = self.config.workspace == "git-root"
            found = await asyncio.to_thread(find_workspace, cwd, use_git)
            self._workspaces[cwd] = found
        return found

    async def server(self, name: str, cwd: Path) -> LanguageServer:
        """The running ``name`` server for ``cwd``'s workspace, started if need be."""
        if self._closed:
            raise ToolError("the lsp plugin is shutting down.", "LSP_UNAVAILABLE")
        root = await self.workspace(cwd)
        supervisor = self._supervisors.get((name, root))
        if supervisor is None:
            supervisor = Supervisor(
                name,
                root,
                self._ctx,
                spec=functools.partial(self.catalog.spec, name),
                timeout=self.config.request_timeout_s,
                max_documents=self.config.max_open_documents,
            )
            self._supervisors[(name, root)] = supervisor
        return await supervisor.get()

    def starting(self, name: str, cwd: Path) -> asyncio.Task[LanguageServer | None]:
        """Start the ``name`` server for ``cwd`` in a task the plugin owns (one per
        server at a time), so a caller that stops waiting leaves it starting: the
        server, or None when it cannot start (not installed, failed: logged)."""
        key = (name, cwd)
        task = self._starting.get(key)
        if task is None or task.done():
            task = self._ctx.spawn(self._start_quietly(name, cwd), name=f"lsp-start:{name}")
            self._starting[key] = task
        return task

    async def _start_quietly(self, name: str, cwd: Path) -> LanguageServer | None:
        try:
            return await self.server(name, cwd)
        except ToolError as error:
            _log.info("the %s language server did not start: %s", name, error.message)
            return None

    def running(self, name: str | None = None, root: Path | None = None) -> list[LanguageServer]:
        """Servers running now (of ``name``, for ``root``); never starts one."""
        found = []
        for (server_name, server_root), supervisor in self._supervisors.items():
            server = supervisor.server
            if server is None or name not in (None, server_name) or root not in (None, server_root):
                continue
            found.append(server)
        return found

    def status(self) -> list[ServerStatus]:
        rows = []
        for (name, root), supervisor in self._supervisors.items():
            server = supervisor.server
            rows.append(
                ServerStatus(
                    name=name,
                    root=root,
                    running=server is not None,
                    pid=server.pid if server is not None else None,
                    starts=supervisor.starts,
                    open_documents=len(server.documents) if server is not None else 0,
                )
            )
        return rows

    async def open(self, server: LanguageServer, source: Source) -> tuple[int, bool]:
        """Show ``server`` the file as it is now (and re-send the other documents it has
        open that changed on disk since): (its version, whether anything was sent)."""
        await self.refresh(server, skip=source.path)
        language = self.catalog.language_id(source.path, server.spec.name)
        return await server.sync_document(source.path, source.text, source.stamp, language)

    async def refresh(self, server: LanguageServer, skip: Path | None = None) -> None:
        """Re-send open documents changed on disk by other means (bash, git) and close
        the deleted ones, so answers about other files are not stale."""
        documents = [(path, doc) for path, doc in server.documents.items() if path != skip]
        if not documents:
            return
        stamps = await asyncio.to_thread(lambda: [current_stamp(path) for path, _ in documents])
        for (path, document), stamp in zip(documents, stamps, strict=True):
            if stamp == document.stamp:
                continue
            try:
                if stamp is None:
                    raise ToolError("gone", "FS_NOT_FOUND")
                source = await asyncio.to_thread(read_source, path, str(path))
            except ToolError:
                await server.close_document(path)
                continue
            await server.sync_document(path, source.text, source.stamp, document.language_id)

    async def forget(self, path: Path) -> None:
        """The file is gone: close it on every server that has it open."""
        for server in self.running():
            if path in server.documents:
                with contextlib.suppress(ToolError):
                    await server.close_document(path)

    async def aclose(self) -> None:
        """Stop every server (``shutdown``/``exit``, killed after a grace period), at once."""
        self._closed = True
        supervisors = list(self._supervisors.values())
        await asyncio.gather(*(s.aclose() for s in supervisors), return_exceptions=True)
