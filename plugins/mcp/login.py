"""``dsh mcp login NAME``: the person's side of the SDK's authorization-code flow.

:class:`Login` listens on 127.0.0.1 at a port of its own (``/callback``), hands the
SDK the redirect URI, opens the authorization URL in the browser (``webbrowser``,
which honours ``$BROWSER``) and prints it, and waits, bounded, for the browser to come
back. Only an answer carrying the ``state`` of the URL it opened is taken: another
page making the browser call the port (to log the user in to someone else's account)
is answered 400 and changes nothing. The page it shows says the tab can be closed and
holds neither the code nor anything else from the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import webbrowser
from collections.abc import Callable
from html import escape
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

LOGIN_WAIT_S = 300.0
"""How long the browser has to come back."""
CALLBACK_PATH = "/callback"
_READ_S = 10.0
_MAX_LINE = 16384
_MAX_HEADERS = 100


def _say(line: str) -> None:
    print(line, flush=True)  # the address, at once, even when stdout is a pipe


class LoginFailed(Exception):
    """The login did not end with a code; the message says why."""


class Login:
    """One login: the callback listener, the browser, and the answer."""

    def __init__(
        self,
        name: str,
        *,
        wait_s: float = LOGIN_WAIT_S,
        say: Callable[[str], None] | None = None,
        open_browser: Callable[[str], object] = webbrowser.open,
    ) -> None:
        self.name = name
        self.wait_s = wait_s
        self._say = say or _say
        self._open_browser = open_browser
        self._server: asyncio.Server | None = None
        self._state: str | None = None
        self._answer: asyncio.Future[AuthorizationCodeResult] | None = None
        self.port = 0

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def start(self) -> None:
        """Listen, at a port the system picks."""
        self._answer = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    # ------------------------------------------------------------ the SDK's handlers

    async def redirect(self, url: str) -> None:
        states = parse_qs(urlsplit(url).query).get("state")
        self._state = states[0] if states else None
        self._say(
            f"Opening the login page of {self.name} in your browser. If it does not open, visit:"
        )
        self._say(url)
        # A browser command may not return until the page is closed (webbrowser waits
        # for $BROWSER): the answer is awaited beside it, not after it.
        threading.Thread(target=self._open_browser, args=(url,), daemon=True).start()

    async def callback(self) -> AuthorizationCodeResult:
        assert self._answer is not None, "start() first"
        try:
            return await asyncio.wait_for(asyncio.shield(self._answer), self.wait_s)
        except TimeoutError:
            raise LoginFailed(f"no answer from the browser within {self.wait_s:g} s") from None

    # ------------------------------------------------------------ the listener

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, text = await asyncio.wait_for(self._answer_request(reader), _READ_S)
        except (
            TimeoutError,
            ValueError,
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            status, text = 400, "dsh could not read this request."
        body = (
            f"<!doctype html><meta charset=utf-8><title>dsh</title><p>{escape(text)}</p>"
        ).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 410: "Gone"}[status]
        head = (
            f"HTTP/1.1 {status} {reason}\r\n"
            "Content-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
        )
        with contextlib.suppress(ConnectionError):
            writer.write(head.encode() + body)
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    async def _answer_request(self, reader: asyncio.StreamReader) -> tuple[int, str]:
        line = await reader.readuntil(b"\r\n")
        for _ in range(_MAX_HEADERS):
            header = await reader.readuntil(b"\r\n")
            if header == b"\r\n":
                break
            if len(header) > _MAX_LINE:
                raise ValueError("header too long")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or parts[0] != "GET":
            return 400, "dsh expected the browser's return from the login page here."
        target = urlsplit(parts[1])
        if target.path != CALLBACK_PATH:
            return 404, "Nothing here."
        query = parse_qs(target.query)

        def one(key: str) -> str | None:
            values = query.get(key)
            return values[0] if values else None

        state = one("state")
        if (
            self._state is None
            or state is None
            or not secrets.compare_digest(state.encode(), self._state.encode())
        ):
            return 400, "This is not the answer to the login dsh started; nothing was changed."
        assert self._answer is not None
        if self._answer.done():
            return 410, "This login is already over. You can close this tab."
        error = one("error")
        if error is not None:
            described = one("error_description")
            self._answer.set_exception(
                LoginFailed(
                    f"the server refused: {error}" + (f" ({described})" if described else "")
                )
            )
            return 200, f"{self.name} refused the login ({error}). You can close this tab."
        code = one("code")
        if not code:
            return 400, "The answer holds no authorization code; nothing was changed."
        self._answer.set_result(AuthorizationCodeResult(code=code, state=state, iss=one("iss")))
        return 200, f"dsh is logging in to {self.name}. You can close this tab."
