"""The ACP agent: the protocol's methods over dsh's sessions, and the stdio it speaks on.

Every request for a session names it by id; an id this process has not opened is an
``invalid params`` error, as are a relative ``cwd`` and a mode dsh has not. Lines that
are not JSON get a JSON-RPC parse error (the SDK would drop them silently), and
anything else malformed the SDK answers (unknown method, wrong params). When the
editor goes away (stdin closes) or ends dsh with a signal (SIGTERM, SIGINT, SIGHUP),
each session's running turn is cancelled with its closing events written, and dsh
exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp import PROTOCOL_VERSION
from acp.core import AgentSideConnection
from acp.exceptions import RequestError
from acp.interfaces import Agent, Client
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    AuthMethodAgent,
    ClientCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
)

from dsh import __version__
from dsh.frontend import ToolServer
from dsh.permission_modes import PermissionMode
from dsh.sandbox.policy import Policy
from dsh.ui.acp.prompt_blocks import PromptBlock, takes_images
from dsh.ui.acp.session import AcpSession
from dsh.ui.session_controller import StartFailed
from dsh.ui.user_interface import SessionChoice

if TYPE_CHECKING:
    from dsh.kernel import Candidate, Context

_log = logging.getLogger("dsh.acp")

API_KEY_METHOD = "dsh-api-key"
LIST_PAGE = 50
"""Sessions in one ``session/list`` page."""


class DshAgent:
    """The ``acp.Agent`` of ``dsh acp``: one :class:`AcpSession` per editor session."""

    def __init__(
        self,
        home: Path | None,
        permission_mode: PermissionMode | None,
        sandbox: Policy | None = None,
    ) -> None:
        self.home = home
        self.permission_mode = permission_mode
        self.sandbox = sandbox
        self.client: Client | None = None
        self.client_capabilities: ClientCapabilities | None = None
        self.sessions: dict[str, AcpSession] = {}
        self._vocabulary: Context | None = None
        """The plugins' vocabulary, loaded at ``initialize``."""

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.client_capabilities = client_capabilities
        if client_info is not None:
            _log.info("client: %s %s", client_info.name, client_info.version)
        await self._load_vocabulary()
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=takes_images(), audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    fork=SessionForkCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
            ),
            auth_methods=[
                AuthMethodAgent(
                    id=API_KEY_METHOD,
                    name="Provider API key",
                    description=(
                        "dsh reads the provider's key from its credential store "
                        "($DSH_HOME/credentials.json) or the environment: run `dsh` in "
                        "a terminal once to set it up, or set the variable your "
                        "provider's settings name (DEEPSEEK_API_KEY by default)."
                    ),
                )
            ],
            agent_info=Implementation(name="dsh", title="dsh", version=__version__),
        )

    async def _load_vocabulary(self) -> None:
        """Register the vocabulary of the plugins the settings enable (the folder dsh
        was started in: the editor's), before any session loads them: the blocks
        they add say which content a prompt may carry (images, when a plugin takes
        them)."""
        from dsh.kernel import Context, load_vocabularies

        if self._vocabulary is not None:
            return
        self._vocabulary = Context(name="acp-vocabulary")
        try:
            candidates = await asyncio.to_thread(self._candidates)
            await load_vocabularies(self._vocabulary, candidates)
        except Exception:
            _log.warning("the plugins' vocabulary could not be loaded", exc_info=True)

    def _candidates(self) -> list[Candidate]:
        from dsh.kernel import discover
        from dsh.paths import dsh_home
        from dsh.settings import load_settings

        settings = load_settings(self.home or dsh_home(), Path.cwd(), check=False)
        disabled = set(settings.disabled_plugins())
        return [c for c in discover(settings.plugin_modules()) if c.name not in disabled]

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse | None:
        if method_id != API_KEY_METHOD:
            raise RequestError.invalid_params({"methodId": f"unknown method {method_id!r}"})
        if not await asyncio.to_thread(self._key_configured):
            raise RequestError.auth_required(
                {
                    "details": "no key is configured for the provider: run `dsh` in a "
                    "terminal to set one up, or set the variable the provider reads"
                }
            )
        return AuthenticateResponse()

    def _key_configured(self) -> bool:
        """Whether the configured provider finds a key (never the key itself)."""
        from dsh.credentials import CredentialStore
        from dsh.paths import dsh_home
        from dsh.settings import load_settings
        from dsh.setup import needs_setup

        home = self.home or dsh_home()
        cwd = Path.cwd()
        settings = load_settings(home, cwd, check=False)
        return not needs_setup(settings, CredentialStore(home, cwd))

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session = await self._open(cwd, None, mcp_servers)
        session.announce_commands()
        session.read_models()
        return NewSessionResponse(
            session_id=session.id, modes=session.modes(), config_options=session.config_options()
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse | None:
        opened = self.sessions.pop(session_id, None)
        if opened is not None:
            await opened.close()  # loaded again: its history is replayed afresh
        session = await self._open(cwd, session_id, mcp_servers)
        session.announce_commands()
        session.read_models()
        return LoadSessionResponse(modes=session.modes(), config_options=session.config_options())

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        """``session/load`` without the history sent: the editor shows it already. A
        session open in this process already is left as it is."""
        session = self.sessions.get(session_id)
        if session is None:
            session = await self._open(cwd, session_id, mcp_servers, replay=False)
            session.announce_commands()
            session.read_models()
        return ResumeSessionResponse(modes=session.modes(), config_options=session.config_options())

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        """A new session that continues the stored one from its last finished turn (as
        ``dsh --resume ID --fork-session``); the source, open here or not, goes on
        unchanged. Its history is not sent: the editor has it."""
        source = self.sessions.get(session_id)
        if source is not None and source.agent is not None:
            await source.agent.flush()  # a batch not written yet is part of what is forked
        session = await self._open(cwd, session_id, mcp_servers, replay=False, fork=True)
        session.announce_commands()
        session.read_models()
        return ForkSessionResponse(
            session_id=session.id, modes=session.modes(), config_options=session.config_options()
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """The session's running turn cancelled (its closing events written), then the
        session and its runtime closed; it stays stored, to load or resume later."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}"})
        await session.close()
        _log.info("session %s closed", session_id)
        return CloseSessionResponse()

    async def _open(
        self,
        cwd: str,
        resume: str | None,
        mcp_servers: list[Any] | None,
        *,
        replay: bool = True,
        fork: bool = False,
    ) -> AcpSession:
        assert self.client is not None
        folder = Path(cwd)
        if not folder.is_absolute():
            raise RequestError.invalid_params({"cwd": "must be an absolute path"})
        if not await asyncio.to_thread(folder.is_dir):
            raise RequestError.invalid_params({"cwd": f"no such folder: {cwd}"})
        choice = SessionChoice(
            cwd=folder,
            home=self.home,
            resume=resume,
            fork=fork,
            permission_mode=self.permission_mode,
            sandbox=self.sandbox,
            tool_servers=tool_servers(mcp_servers or []),
        )
        session = AcpSession(self.client, choice, replay=replay)
        try:
            await session.open()
            session.use_editor_terminals(self.client_capabilities)
        except StartFailed as failed:
            await session.close()
            said = str(failed).removeprefix("dsh: ")
            if resume is not None:
                raise RequestError.invalid_params({"sessionId": said}) from None
            raise RequestError.internal_error({"details": said}) from None
        except BaseException:
            await session.close()
            raise
        # Before any prompt: nothing of the session ran but the replay of a load.
        session.use_editor_files(self.client_capabilities)
        self.sessions[session.id] = session
        _log.info("session %s opened in %s", session.id, folder)
        return session

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The stored sessions (of ``cwd``), newest first, a page at a time; the
        cursor is where the next page starts. The index is brought up to date with
        storage first, as ``dsh sessions list`` does: a session it lost (a damaged or
        deleted index) is listed again, one whose log is gone is not."""
        from dsh.paths import dsh_home
        from dsh.session import SessionStore
        from dsh.settings import SettingsError, load_settings

        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise RequestError.invalid_params({"cursor": "not a cursor dsh gave"}) from None
        home = self.home or dsh_home()
        try:
            backend = load_settings(home, Path(cwd or Path.cwd()), check=False).storage.backend
        except SettingsError:
            backend = "jsonl"  # the settings' own error is for session/new to report
        store = SessionStore.at(home, backend)
        try:
            await store.index_missing(cwd)
            assert store.catalog is not None
            found = await store.catalog.list(cwd=cwd, limit=start + LIST_PAGE + 1)
        finally:
            await store.aclose()
        page = found[start : start + LIST_PAGE]
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=entry.id,
                    cwd=entry.cwd or "",
                    title=entry.display_title,
                    updated_at=_iso(entry.updated_at),
                )
                for entry in page
            ],
            next_cursor=str(start + LIST_PAGE) if len(found) > start + LIST_PAGE else None,
        )

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}"})
        return session

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse | None:
        await self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse | None:
        options = self._session(session_id).set_option(config_id, value)
        return SetSessionConfigOptionResponse(config_options=list(options))

    async def prompt(
        self, session_id: str, prompt: list[PromptBlock], **kwargs: Any
    ) -> PromptResponse:
        return await self._session(session_id).prompt(prompt)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def close(self) -> None:
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            try:
                await session.close()
            except Exception:
                _log.exception("closing session %s failed", session.controller.agent)
        if self._vocabulary is not None:
            await self._vocabulary.dispose()


def _iso(timestamp: int) -> str:
    """An epoch time (milliseconds, or seconds) as ISO 8601, UTC."""
    seconds = timestamp / 1000 if timestamp > 100_000_000_000 else timestamp
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def tool_servers(servers: list[Any]) -> tuple[ToolServer, ...]:
    """The client's MCP servers (``session/new``'s ``mcpServers``), as dsh's front ends
    offer them to the plugins."""
    offered: list[ToolServer] = []
    for server in servers:
        match server:
            case McpServerStdio():
                offered.append(
                    ToolServer(
                        name=server.name,
                        transport="stdio",
                        command=server.command,
                        args=tuple(server.args),
                        env={variable.name: variable.value for variable in server.env},
                    )
                )
            case HttpMcpServer() | SseMcpServer():
                offered.append(
                    ToolServer(
                        name=server.name,
                        transport=server.type,
                        url=server.url,
                        headers={header.name: header.value for header in server.headers},
                    )
                )
            case _:
                _log.warning("a client MCP server of type %r is not started", server.type)
    return tuple(offered)


class LineTransport:
    """Newline-delimited JSON-RPC on a reader and a writer, as the SDK's own, except
    that a line that is not a JSON object is answered with an error, not dropped."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # longer than the reader's limit
                await self._error(-32700, "Parse error: the message is too large")
                continue
            if not line:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                await self._error(-32700, "Parse error")
                continue
            if not isinstance(message, dict):
                await self._error(-32600, "Invalid Request: not a JSON object")
                continue
            return message

    async def _error(self, code: int, text: str) -> None:
        _log.warning("from the client: %s", text)
        await self.send({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}})

    async def close(self) -> None:
        self._writer.close()


async def serve(agent: DshAgent, protocol_in: int, protocol_out: int) -> None:
    """Speak ACP on the two file descriptors until the client closes its end."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(protocol_in, "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    # Methods DshAgent lacks (session/delete...) are answered "method not found". The
    # SDK counts session/close, resume and fork as the protocol's unstable part: on.
    connection = AgentSideConnection(
        cast(Agent, agent),
        LineTransport(reader, writer),
        listening=False,
        use_unstable_protocol=True,
    )
    listening = asyncio.ensure_future(connection.listen())
    # The editor may end dsh with a signal rather than closing stdin: each session's
    # turn is then closed as it is when stdin closes.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, listening.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await listening
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        await agent.close()
        await connection.close()
