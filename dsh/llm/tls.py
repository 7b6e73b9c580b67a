"""The TLS context an adapter's HTTP client verifies servers with, made without
holding up start-up.

Loading the CA bundle costs 30-70 ms, a tenth of a whole headless run, so it is
loaded in a thread of its own (OpenSSL lets go of the GIL while it parses) from the
moment the adapter is made, and the first request waits for what is left of it. A
plain-HTTP endpoint with no proxy configured (a local server) makes no TLS connection
at all: it gets a context with no CAs, which would refuse any server it met.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import ssl
import threading
import urllib.parse

__all__ = ["TlsContext", "default_context", "needs_tls"]

_PROXY_VARIABLES = frozenset({"http_proxy", "all_proxy"})


def needs_tls(base_url: str) -> bool:
    """Whether requests to ``base_url`` may go over TLS: an https URL, or a plain one
    sent through a proxy (which may itself be reached over TLS)."""
    if urllib.parse.urlsplit(base_url).scheme.lower() != "http":
        return True
    return any(name.lower() in _PROXY_VARIABLES and value for name, value in os.environ.items())


def default_context() -> ssl.SSLContext:
    """The context httpx makes by default (``httpx.create_ssl_context()``): the CAs of
    ``SSL_CERT_FILE`` or ``SSL_CERT_DIR``, else certifi's bundle. Made here without
    importing httpx, which the adapters import at their first request: a start-up
    that sends nothing before the person types does not wait for it."""
    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class TlsContext:
    """The context for one base URL, loading in the background from construction."""

    def __init__(self, base_url: str) -> None:
        self._future: concurrent.futures.Future[ssl.SSLContext] = concurrent.futures.Future()
        # Running from the start, so a request cancelled while it waits cannot cancel
        # the load for the requests after it.
        self._future.set_running_or_notify_cancel()
        if not needs_tls(base_url):
            # TLS_CLIENT verifies hostnames and certificates by default; with no CAs
            # loaded, no certificate can pass.
            self._future.set_result(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
            return
        threading.Thread(target=self._load, name="dsh-tls-context", daemon=True).start()

    def _load(self) -> None:
        try:
            context = default_context()
        except BaseException as error:  # handed to whoever awaits the context
            self._future.set_exception(error)
        else:
            self._future.set_result(context)

    async def get(self) -> ssl.SSLContext:
        """The context; raises ``OSError`` (or ``ssl.SSLError``) if the CAs named by
        the environment could not be loaded."""
        if self._future.done():
            return self._future.result()
        return await asyncio.wrap_future(self._future)
