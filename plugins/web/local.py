"""Fetching a page from this machine, safely.

http and https only; every host is resolved and checked (:mod:`dsh_plugins.web.addresses`)
and the connection made to the checked address, the name kept for the ``Host`` header
and for TLS (SNI and certificate checks). Redirects are followed by hand so each hop is
checked again; one to another host is not followed but returned, so the model asks
for it with a call of its own, which the permission rules see. The body is read up to
a size cap, within one deadline, and only text types are read at all.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh import __version__
from dsh_plugins.web.addresses import BlockedAddress, Resolved, resolve_public
from dsh_plugins.web.markdown import HTML_TYPES, html_to_markdown, media_type, readable

if TYPE_CHECKING:  # imported where a fetch needs it, not when the plugin loads
    import httpx

USER_AGENT = f"dsh/{__version__} (web_fetch)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class FetchError(Exception):
    """A fetch that failed or was refused; the message says why."""


@dataclass(frozen=True)
class Page:
    url: str
    """Where the page was read from, after redirects on the same host."""
    title: str
    text: str
    """Markdown for HTML, the text itself for other text types."""
    content_type: str
    truncated: bool = False


@dataclass(frozen=True)
class Redirected:
    """The server sent the request to another host: not followed."""

    url: str
    location: str


def checked_url(text: str) -> httpx.URL:
    """``text`` as an absolute http(s) URL without credentials, or FetchError."""
    import httpx

    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, TypeError) as error:
        raise FetchError(f"not a URL: {text!r} ({error})") from None
    if url.scheme not in ("http", "https"):
        raise FetchError(f"only http and https URLs can be fetched, not {url.scheme or text!r}")
    if not url.host:
        raise FetchError(f"no host in {text!r}")
    if url.userinfo:
        raise FetchError("a URL with a user name or password is not fetched")
    return url


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host.lower(), url.port


class LocalFetcher:
    def __init__(
        self,
        *,
        allow_private: bool = False,
        max_bytes: int = 5_000_000,
        timeout_s: float = 30.0,
        max_redirects: int = 5,
        private_hosts: tuple[str, ...] = (),
    ) -> None:
        self.allow_private = allow_private
        self.private_hosts = frozenset(host.lower() for host in private_hosts)
        """Hosts (``name`` or ``name:port``) reached though private: an intranet wiki."""
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects
        self._tls: ssl.SSLContext | None = None

    async def _context(self) -> ssl.SSLContext:
        if self._tls is None:  # loading the CA bundle takes tens of ms: not on the loop
            import httpx

            self._tls = await asyncio.to_thread(httpx.create_ssl_context)
        return self._tls

    def may_be_private(self, url: httpx.URL) -> bool:
        host = url.host.lower()
        return (
            self.allow_private
            or host in self.private_hosts
            or (url.port is not None and f"{host}:{url.port}" in self.private_hosts)
        )

    async def _resolve(self, url: httpx.URL) -> Resolved:
        """The checked address to connect to for ``url``'s host (BlockedAddress if none)."""
        port = url.port or (443 if url.scheme == "https" else 80)
        return await resolve_public(url.host, port, allow_private=self.may_be_private(url))

    async def fetch(self, address: str) -> Page | Redirected:
        url = checked_url(address)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._follow(url)
        except TimeoutError:
            raise FetchError(
                f"no complete answer from {url.host} in {self.timeout_s:g} s"
            ) from None

    async def _follow(self, url: httpx.URL) -> Page | Redirected:
        import httpx

        context = await self._context()
        # trust_env off: a proxy would connect wherever it likes, past the checks.
        async with httpx.AsyncClient(verify=context, trust_env=False) as client:
            for _ in range(self.max_redirects + 1):
                try:
                    answer = await self._hop(client, url)
                except BlockedAddress as error:
                    raise FetchError(
                        f"refused: {error} (set allow_private in [plugins.web] to allow it)"
                    ) from None
                if isinstance(answer, httpx.URL):
                    if _origin(answer) != _origin(url) and not (
                        # http -> https on the same host is an upgrade, not a move
                        url.scheme == "http"
                        and answer.scheme == "https"
                        and answer.host.lower() == url.host.lower()
                    ):
                        # Not followed; but where it leads is checked now, so the model
                        # is not invited to fetch what would be refused.
                        try:
                            await self._resolve(answer)
                        except BlockedAddress as error:
                            raise FetchError(
                                f"refused: {url} redirects to {answer}, and {error}"
                            ) from None
                        return Redirected(str(url), str(answer))
                    url = answer
                    continue
                return answer
        raise FetchError(f"more than {self.max_redirects} redirects from {url}")

    async def _hop(self, client: httpx.AsyncClient, url: httpx.URL) -> Page | httpx.URL:
        import httpx

        resolved = await self._resolve(url)
        host_header = url.host if url.port is None else f"{url.host}:{url.port}"
        if ":" in url.host and not host_header.startswith("["):
            host_header = f"[{url.host}]" + (f":{url.port}" if url.port else "")
        target = url.copy_with(host=str(resolved.address))
        request = client.build_request(
            "GET",
            target,
            headers={
                "Host": host_header,
                "User-Agent": USER_AGENT,
                "Accept": "text/html, text/markdown, text/plain;q=0.9, */*;q=0.5",
            },
            extensions={"sni_hostname": url.host} if url.scheme == "https" else {},
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise FetchError(f"cannot fetch {url}: {error}") from None
        try:
            if response.status_code in _REDIRECTS and "location" in response.headers:
                location = response.headers["location"]
                try:
                    return checked_url(str(url.join(location)))
                except FetchError as error:
                    raise FetchError(f"{url} redirects to {location!r}: {error}") from None
            if response.status_code >= 400:
                raise FetchError(
                    f"{url} answered {response.status_code} {response.reason_phrase}".rstrip()
                )
            content_type = response.headers.get("content-type", "application/octet-stream")
            if not readable(content_type):
                raise FetchError(
                    f"{url} is {media_type(content_type) or 'of no stated type'}, not text: "
                    "web_fetch reads pages and text files"
                )
            body, truncated = await self._read(response)
        finally:
            await response.aclose()
        text = body.decode(response.charset_encoding or "utf-8", errors="replace")
        if media_type(content_type) in HTML_TYPES:
            title, text = await asyncio.to_thread(html_to_markdown, text)
        else:
            title = ""
        return Page(str(url), title, text, media_type(content_type), truncated)

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= self.max_bytes:
                return b"".join(chunks)[: self.max_bytes], True
        return b"".join(chunks), False
