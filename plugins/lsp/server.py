"""One language-server process: started, initialized, kept in step with the documents
it was shown, its diagnostics collected, and stopped.

The process gets the session's environment minus anything that looks like a
credential (``child_environment``), runs in a session of its own (so a kill reaches
anything it started), and is watched: when it exits unasked, every request in flight
fails with the exit status and the tail of its stderr, and the owner (a
:class:`~plugins.lsp.supervisor.Supervisor`) hears of it to restart it later. Its
tasks (the read loop, the stderr drain, the exit watch) belong to a kernel context
that is disposed with it, so none outlives it.

Errors leave here as :class:`~dsh.tools.ToolError` with the codes the tool reports:
``LSP_TIMEOUT``, ``LSP_SERVER_CRASHED``, ``LSP_MALFORMED_RESPONSE``,
``LSP_REQUEST_FAILED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh import __version__
from dsh.kernel import Context
from dsh.processes import adopt
from dsh.sandbox import SandboxUnavailable, Wrapped, launch_options
from dsh.services import SANDBOX
from dsh.tools import ToolError, child_environment
from dsh_plugins.lsp.diagnostics import DiagnosticsStore
from dsh_plugins.lsp.files import Stamp, to_uri
from dsh_plugins.lsp.positions import ENCODINGS, Encoding
from dsh_plugins.lsp.rpc import (
    METHOD_NOT_FOUND,
    Connection,
    ConnectionClosed,
    ProtocolError,
    RequestTimeout,
    ResponseError,
)
from dsh_plugins.lsp.servers import ServerSpec

STDERR_KEEP = 8 * 1024
"""Bytes of stderr kept: enough for a traceback's last lines in a crash message."""
SHUTDOWN_GRACE_S = 5.0
READ_LIMIT = 1024 * 1024
CACHE_INSIDE = "/tmp/.cache"
"""``XDG_CACHE_HOME`` of a sandboxed server: in the sandbox's private, writable /tmp."""

_log = logging.getLogger("dsh.plugins.lsp")


@dataclass
class Document:
    """A file the server has open, as we last sent it."""

    version: int
    text: str
    stamp: Stamp | None
    language_id: str


class LanguageServer:
    """See the module docstring. ``on_exit`` is called once if the process exits while
    not being stopped; ``on_answer`` after each successful request."""

    def __init__(
        self,
        spec: ServerSpec,
        root: Path,
        ctx: Context,
        *,
        timeout: float,
        max_documents: int,
        on_exit: Callable[[LanguageServer], None] | None = None,
        on_answer: Callable[[], None] | None = None,
    ) -> None:
        self.spec = spec
        self.root = root
        self.timeout = timeout
        self.max_documents = max_documents
        self.capabilities: dict[str, Any] = {}
        self.encoding: Encoding = spec.position_encoding or "utf-16"
        """How the server counts columns (see ``positions``)."""
        self._quirk = spec.quirk if spec.position_encoding is None else None
        self.documents: OrderedDict[Path, Document] = OrderedDict()
        self._ctx = ctx
        self._on_exit = on_exit
        self._on_answer = on_answer
        self._process: asyncio.subprocess.Process | None = None
        self._connection: Connection | None = None
        self._documents_lock = asyncio.Lock()
        self.diagnostics = DiagnosticsStore()
        self._stderr = bytearray()
        self._stderr_done = asyncio.Event()
        self._exited = asyncio.Event()
        self._stopping = False
        self._sandboxed = False

    # ------------------------------------------------------------------ identity

    @property
    def label(self) -> str:
        return f"{self.spec.name} language server ({self.spec.program})"

    def diagnostic_encoding(self, source: str | None) -> Encoding:
        """How the columns of a diagnostic from ``source`` are counted."""
        if self._quirk is not None and source is not None:
            return self._quirk.diagnostics.get(source, self.encoding)
        return self.encoding

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return (
            self._process is not None
            and self._process.returncode is None
            and self._connection is not None
            and not self._connection.closed
            and not self._stopping
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Spawn the process and run ``initialize``/``initialized``; on failure the
        process is stopped and a ToolError raised."""
        env = child_environment(os.environ)
        env.update(self.spec.env)
        wrapped = await self._contain(env)
        self._sandboxed = wrapped.sandboxed
        try:
            process = await asyncio.create_subprocess_exec(
                *wrapped.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.root,
                env=wrapped.env,
                limit=READ_LIMIT,
                **launch_options(wrapped),  # its own group, ended with dsh
            )
            adopt(process.pid)
        except OSError as error:
            raise ToolError(
                f"could not start the {self.label}: {error.strerror or error}.", "LSP_UNAVAILABLE"
            ) from None
        assert process.stdin is not None
        assert process.stdout is not None
        self._process = process
        self._connection = Connection(
            process.stdout,
            process.stdin,
            on_request=self._on_request,
            on_notification=self._on_notification,
        )
        name = f"lsp:{self.spec.name}:{process.pid}"
        self._ctx.spawn(self._read(), name=f"{name}:read")
        self._ctx.spawn(self._drain_stderr(), name=f"{name}:stderr")
        self._ctx.spawn(self._watch(), name=f"{name}:watch")
        try:
            result = await self.request("initialize", self._initialize_params(), healthy=False)
            if not isinstance(result, dict) or not isinstance(result.get("capabilities"), dict):
                raise ToolError(
                    f"the {self.label} answered initialize without capabilities.",
                    "LSP_MALFORMED_RESPONSE",
                )
            self.capabilities = result["capabilities"]
            declared = self.capabilities.get("positionEncoding")
            if self.spec.position_encoding is None and declared in ENCODINGS:
                self.encoding, self._quirk = declared, None
            elif self._quirk is not None:
                self.encoding = self._quirk.encoding
            await self.notify("initialized", {})
            if self.spec.settings:
                await self.notify(
                    "workspace/didChangeConfiguration", {"settings": self.spec.settings}
                )
        except BaseException:
            await self.stop(grace=0)
            raise

    async def _contain(self, env: dict[str, str]) -> Wrapped:
        """The server's command line: inside the sandbox (with no network: it talks
        over its pipes) unless ``[sandbox] language_servers`` is false."""
        command = list(self.spec.command)
        sandbox = self._ctx.get(SANDBOX, None)
        if sandbox is None or not sandbox.table.language_servers:
            return Wrapped(command, env)
        # The home is read-only inside: a server's parse caches (jedi's, parso's in
        # ~/.cache) go to the sandbox's private /tmp, kept while dsh runs.
        inside = {**env, "XDG_CACHE_HOME": CACHE_INSIDE}
        try:
            return await sandbox.wrap(command, cwd=self.root, env=inside, shared_network=False)
        except SandboxUnavailable as error:
            raise ToolError(
                f"the {self.label} was not started: the sandbox cannot start ({error}). "
                "`language_servers = false` in [sandbox] of your settings runs language "
                "servers outside it.",
                "LSP_UNAVAILABLE",
            ) from None

    def _initialize_params(self) -> dict[str, Any]:
        uri = to_uri(self.root)
        return {
            # A server watches this process and exits when it is gone; in the
            # sandbox's PID namespace dsh's PID names nothing (or another process).
            "processId": None if self._sandboxed else os.getpid(),
            "clientInfo": {"name": "dsh", "version": __version__},
            "locale": "en",
            "rootPath": str(self.root),
            "rootUri": uri,
            "workspaceFolders": [{"uri": uri, "name": self.root.name or str(self.root)}],
            "initializationOptions": self.spec.initialization_options,
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {
                    "configuration": True,
                    "workspaceFolders": True,
                    "applyEdit": False,
                    "symbol": {"dynamicRegistration": False},
                    "didChangeConfiguration": {"dynamicRegistration": False},
                },
                "textDocument": {
                    "synchronization": {"dynamicRegistration": False, "didSave": True},
                    "hover": {"contentFormat": ["markdown", "plaintext"]},
                    "definition": {"linkSupport": True},
                    "references": {},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
                    "publishDiagnostics": {"versionSupport": True},
                },
                "window": {"workDoneProgress": True},
            },
        }

    async def stop(self, grace: float = SHUTDOWN_GRACE_S) -> None:
        """Ask the server to end (``shutdown``, then ``exit`` and the end of its input)
        and kill it if it has not within ``grace`` seconds; then kill what it left
        behind in its process group and end its tasks. Never raises."""
        self._stopping = True
        process, connection = self._process, self._connection
        try:
            if process is not None and connection is not None:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + grace
                if grace > 0 and process.returncode is None and not connection.closed:
                    with contextlib.suppress(Exception):
                        await connection.request("shutdown", None, min(grace / 2, self.timeout))
                    with contextlib.suppress(Exception):
                        await connection.notify("exit", None)
                if process.stdin is not None:
                    process.stdin.close()
                if process.returncode is None:
                    try:
                        async with asyncio.timeout(max(deadline - loop.time(), 0.05)):
                            await process.wait()
                    except TimeoutError:
                        self.kill()
                        await process.wait()
                connection.close(ConnectionClosed(f"the {self.label} was stopped"))
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)  # helpers it started, if any
        finally:
            await self._ctx.dispose()

    def kill(self) -> None:
        """End the process (and anything it started) at once."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def _read(self) -> None:
        assert self._connection is not None
        assert self._process is not None
        try:
            await self._connection.run()
        except ProtocolError as error:
            _log.warning("%s sent a malformed message: %s", self.label, error)
            self.kill()
            return
        # Its output ended: the process is on its way out; make sure it goes.
        try:
            async with asyncio.timeout(2.0):
                await self._process.wait()
        except TimeoutError:
            self.kill()

    async def _drain_stderr(self) -> None:
        assert self._process is not None
        assert self._process.stderr is not None
        try:
            while chunk := await self._process.stderr.read(4096):
                self._stderr += chunk
                if len(self._stderr) > STDERR_KEEP:
                    del self._stderr[: len(self._stderr) - STDERR_KEEP]
        finally:
            self._stderr_done.set()

    async def _watch(self) -> None:
        assert self._process is not None
        assert self._connection is not None
        await self._process.wait()
        # Let the stderr drain take the last words before they are quoted.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self._stderr_done.wait()
        self._connection.close(ConnectionClosed(self.exit_description()))
        self._exited.set()
        self.diagnostics.close()
        if not self._stopping and self._on_exit is not None:
            self._on_exit(self)

    def exit_description(self) -> str:
        """How the process ended, with its last stderr lines: for crash messages."""
        process = self._process
        code = process.returncode if process is not None else None
        if code is None:
            how = "closed its connection"
        elif code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        text = self._stderr.decode("utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()][-5:]
        tail = " | ".join(lines)
        if len(tail) > 600:
            tail = "…" + tail[-600:]
        return f"the {self.label} {how}" + (f"; its last output: {tail}" if tail else "")

    # ------------------------------------------------------------------ messages

    async def request(self, method: str, params: Any, *, healthy: bool = True) -> Any:
        """A request's result, or the ToolError that says why there is none."""
        connection = self._connection
        if connection is None:
            raise ToolError(f"the {self.label} is not running.", "LSP_SERVER_CRASHED")
        try:
            result = await connection.request(method, params, self.timeout)
        except RequestTimeout as error:
            raise ToolError(
                f"the {self.label} did not answer {method} within {error.seconds:g} s; the "
                "request was cancelled. It may still be indexing: try again shortly.",
                "LSP_TIMEOUT",
            ) from None
        except ConnectionClosed:
            raise ToolError(await self._crash_message(), "LSP_SERVER_CRASHED") from None
        except ProtocolError as error:
            raise ToolError(
                f"the {self.label} sent a malformed message ({error}); it was stopped and "
                "will be restarted on the next call.",
                "LSP_MALFORMED_RESPONSE",
            ) from None
        except ResponseError as error:
            raise ToolError(
                f"the {self.label} could not answer {method}: {error.message} "
                f"(error {error.code}).",
                "LSP_REQUEST_FAILED",
            ) from None
        if healthy and self._on_answer is not None:
            self._on_answer()
        return result

    async def notify(self, method: str, params: Any) -> None:
        connection = self._connection
        if connection is None:
            raise ToolError(f"the {self.label} is not running.", "LSP_SERVER_CRASHED")
        try:
            await connection.notify(method, params)
        except (ConnectionClosed, ProtocolError):
            raise ToolError(await self._crash_message(), "LSP_SERVER_CRASHED") from None

    async def _crash_message(self) -> str:
        if self._stopping:
            return f"the {self.label} was stopped (dsh is shutting it down)."
        # The read loop may notice the end before the exit status is known: wait a moment.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self._exited.wait()
        return f"{self.exit_description()}. The next call starts it again."

    def _on_request(self, method: str, params: Any) -> Any:
        if method == "workspace/configuration":
            items = params.get("items", []) if isinstance(params, dict) else []
            return [self._setting(item) for item in items]
        if method in (
            "client/registerCapability",
            "client/unregisterCapability",
            "window/workDoneProgress/create",
            "window/showMessageRequest",
            "workspace/semanticTokens/refresh",
            "workspace/inlayHint/refresh",
            "workspace/codeLens/refresh",
            "workspace/diagnostic/refresh",
        ):
            return None
        if method == "workspace/workspaceFolders":
            return [{"uri": to_uri(self.root), "name": self.root.name or str(self.root)}]
        if method == "workspace/applyEdit":
            return {"applied": False, "failureReason": "dsh changes files with its own tools"}
        raise ResponseError(METHOD_NOT_FOUND, f"dsh does not handle {method}")

    def _setting(self, item: Any) -> Any:
        """The value of one ``workspace/configuration`` item: the section of our
        settings (a dotted path), or null when there is none."""
        settings: Any = self.spec.settings or {}
        section = item.get("section") if isinstance(item, dict) else None
        if not section:
            return settings or None
        for part in str(section).split("."):
            if not isinstance(settings, dict) or part not in settings:
                return None
            settings = settings[part]
        return settings

    def _on_notification(self, method: str, params: Any) -> None:
        # logMessage, showMessage, $/progress, telemetry: nothing to do.
        if method == "textDocument/publishDiagnostics":
            self.diagnostics.publish(params)

    # ------------------------------------------------------------------ documents

    async def sync_document(
        self, path: Path, text: str, stamp: Stamp | None, language_id: str
    ) -> tuple[int, bool]:
        """Open the document, or send its new text: (its version, whether anything was
        sent). The least recently used documents are closed past ``max_documents``."""
        async with self._documents_lock:
            document = self.documents.get(path)
            if document is None:
                self.documents[path] = Document(1, text, stamp, language_id)
                await self.notify(
                    "textDocument/didOpen",
                    {
                        "textDocument": {
                            "uri": to_uri(path),
                            "languageId": language_id,
                            "version": 1,
                            "text": text,
                        }
                    },
                )
                while len(self.documents) > self.max_documents:
                    oldest, _ = self.documents.popitem(last=False)
                    await self.notify(
                        "textDocument/didClose", {"textDocument": {"uri": to_uri(oldest)}}
                    )
                return 1, True
            self.documents.move_to_end(path)
            document.stamp = stamp
            if document.text == text:
                return document.version, False
            document.version += 1
            document.text = text
            await self.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": to_uri(path), "version": document.version},
                    "contentChanges": [{"text": text}],
                },
            )
            return document.version, True

    async def save_document(self, path: Path) -> None:
        """Tell the server the file was saved, if it wants to know (linters run then)."""
        sync = self.capabilities.get("textDocumentSync")
        save = sync.get("save") if isinstance(sync, dict) else None
        document = self.documents.get(path)
        if not save or document is None:
            return
        params: dict[str, Any] = {"textDocument": {"uri": to_uri(path)}}
        if isinstance(save, dict) and save.get("includeText"):
            params["text"] = document.text
        await self.notify("textDocument/didSave", params)

    async def close_document(self, path: Path) -> None:
        async with self._documents_lock:
            if self.documents.pop(path, None) is not None:
                await self.notify("textDocument/didClose", {"textDocument": {"uri": to_uri(path)}})
        self.diagnostics.forget(path)
