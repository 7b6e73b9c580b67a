"""The TLS context an adapter verifies servers with: loaded in the background, and none
needed for plain local HTTP. (Requests through it, against a real TLS server on
127.0.0.1: tests/plugins/test_chat_completions.py.)"""

from __future__ import annotations

import asyncio
import ssl

import pytest

from dsh.llm.tls import TlsContext, needs_tls


def test_only_plain_http_without_a_proxy_goes_without(
    no_proxy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not needs_tls("http://127.0.0.1:8080/v1")
    assert not needs_tls("HTTP://localhost")
    assert needs_tls("https://api.deepseek.com")
    monkeypatch.setenv("HTTP_PROXY", "")
    assert not needs_tls("http://127.0.0.1:8080")  # set but empty: no proxy
    monkeypatch.setenv("all_proxy", "https://proxy.example:3128")
    assert needs_tls("http://127.0.0.1:8080")  # the proxy may be reached over TLS


async def test_the_plain_http_context_trusts_nobody(no_proxy: None) -> None:
    context = await TlsContext("http://127.0.0.1:1").get()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0


async def test_an_https_context_loads_the_ca_bundle_and_outlives_a_cancelled_wait(
    no_proxy: None,
) -> None:
    tls = TlsContext("https://api.deepseek.com")
    waiting = asyncio.ensure_future(tls.get())
    await asyncio.sleep(0)
    waiting.cancel()  # a request cancelled while the bundle loads
    context = await asyncio.wait_for(tls.get(), 10)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 10
