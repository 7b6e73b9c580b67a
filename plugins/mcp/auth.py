"""OAuth for remote MCP servers: the SDK's ``OAuthClientProvider`` with its tokens
kept in ``$DSH_HOME/mcp-auth/``.

One file per server *name and URL* (``<name>-<hash of name and URL>.json``, 0600, in
a 0700 folder, replaced whole through a temporary file): a server renamed or pointed
at another URL finds no token, so a token is never sent anywhere but where it was
granted. The file also names its server and URL, and one that does not match is
ignored.

A normal start never opens a browser: :class:`DshOAuth` without a login turns the
server's 401 into :class:`LoginRequired` before the SDK discovers, registers or
redirects anything (its refresh of an expired token still runs: that needs no
person). ``dsh mcp login NAME`` gives it a :class:`~plugins.mcp.login.Login`, which
runs the SDK's whole authorization-code flow with the browser.

The SDK keeps no expiry time with a stored token (``expires_in`` is relative to when
it was issued), so the file keeps the absolute time and :meth:`DshOAuth._initialize`
puts it back: an expired token is refreshed before it is sent, not found out by a 401.
The authorization server's metadata is kept too, so the refresh goes to its token
endpoint. An expired token is first looked for in the file again, in case another dsh
refreshed it (and spent the refresh token held here).

This module imports the SDK: only :mod:`dsh_plugins.mcp.connection` and ``dsh mcp login``
use it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)
from pydantic import AnyUrl, BaseModel, ConfigDict, ValidationError

import dsh
from dsh.paths import PRIVATE_FILE, dsh_home, private_dir
from dsh_plugins.mcp import guard
from dsh_plugins.mcp.config import AUTH_DIR
from dsh_plugins.mcp.schema import clean

PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"
"""The redirect URI a connection without a login registers with: never used, since
such a connection stops at the first 401."""


class LoginRequired(Exception):
    """The server wants a login and this start may not ask a person for one."""


def auth_dir() -> Path:
    return dsh_home() / AUTH_DIR


def auth_path(name: str, url: str) -> Path:
    digest = hashlib.sha256(f"{name}\0{url}".encode()).hexdigest()[:24]
    return auth_dir() / f"{clean(name)[:48]}-{digest}.json"


class Stored(BaseModel):
    """One server's file."""

    model_config = ConfigDict(extra="ignore")

    server: str
    url: str
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    """When the access token expires (seconds since the epoch), if the server said."""
    client_info: OAuthClientInformationFull | None = None
    metadata: OAuthMetadata | None = None


class FileTokenStorage:
    """The SDK's ``TokenStorage`` for one server, in its file (blocking file work in
    threads)."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.path = auth_path(name, url)

    # ------------------------------------------------------------ blocking

    def read(self) -> Stored:
        """What is stored, or nothing: a missing, unreadable or foreign file alike."""
        empty = Stored(server=self.name, url=self.url)
        try:
            stored = Stored.model_validate_json(self.path.read_bytes())
        except (OSError, ValidationError):
            return empty
        if stored.server != self.name or stored.url != self.url:
            return empty
        return stored

    def write(self, stored: Stored) -> None:
        folder = private_dir(self.path.parent)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".auth-", suffix=".tmp")
        try:
            os.fchmod(fd, PRIVATE_FILE)
            with os.fdopen(fd, "wb") as out:
                fd = -1
                out.write(stored.model_dump_json(exclude_none=True).encode())
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
            guard.stored_here()
        except BaseException:
            if fd != -1:
                os.close(fd)
            Path(temporary).unlink(missing_ok=True)
            raise

    def _update(self, **changes: object) -> None:
        self.write(self.read().model_copy(update=changes))

    # ------------------------------------------------------------ TokenStorage

    async def get_tokens(self) -> OAuthToken | None:
        return (await asyncio.to_thread(self.read)).tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await asyncio.to_thread(self._update, tokens=tokens, expires_at=expires)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return (await asyncio.to_thread(self.read)).client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await asyncio.to_thread(self._update, client_info=client_info)

    # ------------------------------------------------------------ dsh's own

    async def get(self) -> Stored:
        return await asyncio.to_thread(self.read)

    async def set_metadata(self, metadata: OAuthMetadata) -> None:
        await asyncio.to_thread(self._update, metadata=metadata)

    async def forget_client(self) -> None:
        """Drop the client registration: the next flow registers again."""

        def forget() -> None:
            stored = self.read()
            if stored.client_info is not None:
                self.write(stored.model_copy(update={"client_info": None}))

        await asyncio.to_thread(forget)


def forget(name: str) -> list[Path]:
    """Delete every stored login of server ``name``, whatever its URL (blocking);
    the files deleted."""
    folder = auth_dir()
    gone: list[Path] = []
    try:
        candidates = sorted(folder.glob(f"{clean(name)[:48]}-*.json"))
    except OSError:
        return gone
    for path in candidates:
        try:
            server = json.loads(path.read_bytes()).get("server")
        except (OSError, ValueError, AttributeError):
            continue
        if server == name:
            path.unlink(missing_ok=True)
            gone.append(path)
    return gone


Redirect = Callable[[str], Awaitable[None]]
Callback = Callable[[], Awaitable[AuthorizationCodeResult]]


class DshOAuth(OAuthClientProvider):
    """The SDK's provider with the file storage; without ``redirect``/``callback``
    (a normal start) a 401 raises :class:`LoginRequired` at once. ``on_error`` hears
    of any error of the flow: the transports swallow what an ``httpx`` auth raises."""

    def __init__(
        self,
        storage: FileTokenStorage,
        *,
        on_error: Callable[[Exception], None],
        redirect: Redirect | None = None,
        callback: Callback | None = None,
        redirect_uri: str = PLACEHOLDER_REDIRECT,
    ) -> None:
        super().__init__(
            server_url=storage.url,
            client_metadata=OAuthClientMetadata(
                client_name="dsh",
                software_id="dsh",
                software_version=dsh.__version__,
                redirect_uris=[AnyUrl(redirect_uri)],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=redirect,
            callback_handler=callback,
        )
        self._storage = storage
        self._interactive = redirect is not None and callback is not None
        self._on_error = on_error

    async def _initialize(self) -> None:
        await super()._initialize()
        stored = await self._storage.get()
        if self.context.current_tokens is not None:
            self.context.token_expiry_time = stored.expires_at
        if self.context.oauth_metadata is None:
            self.context.oauth_metadata = stored.metadata

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        if self.context.oauth_metadata is not None:
            await self._storage.set_metadata(self.context.oauth_metadata)

    async def _adopt_stored(self) -> None:
        """Another dsh may have refreshed the token meanwhile and, where the server
        rotates refresh tokens, spent the one held here: an expired token is looked
        for in the file before it is refreshed."""
        context = self.context
        held = context.current_tokens
        if not self._initialized or held is None or context.is_token_valid():
            return
        stored = await self._storage.get()
        if stored.tokens is not None and stored.tokens.access_token != held.access_token:
            context.current_tokens = stored.tokens
            context.token_expiry_time = stored.expires_at

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        await self._adopt_stored()
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if (
                    outgoing is request
                    and not self._interactive
                    and (response.status_code == 401 or _wants_scope(response))
                ):
                    raise LoginRequired()
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except Exception as error:
            self._on_error(error)
            raise
        finally:
            await flow.aclose()


def _wants_scope(response: httpx2.Response) -> bool:
    challenge = response.headers.get("www-authenticate", "")
    return response.status_code == 403 and "insufficient_scope" in challenge
