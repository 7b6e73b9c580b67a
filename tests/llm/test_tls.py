"""The adapter's TLS context: loaded in the background, none needed for plain local HTTP,
and verification always on, against a real TLS server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.llm import GenerateOptions, LlmError, user_text
from dsh.llm.chat_completions import ChatCompletionsAdapter
from dsh.llm.tls import TlsContext, needs_tls

OPTIONS = GenerateOptions(provider="local", model="m", messages=(user_text("hi"),))


async def failure_from(base_url: str) -> LlmError:
    adapter = ChatCompletionsAdapter(base_url=base_url, models={}, api_key=lambda: "sk-test")
    try:
        with pytest.raises(LlmError) as raised:
            async for _ in adapter.stream(OPTIONS):
                pass
    finally:
        await adapter.aclose()
    return raised.value


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


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


async def test_ca_settings_that_cannot_be_loaded_fail_the_request_clearly(
    no_proxy: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    failure = (await failure_from("https://127.0.0.1:9")).failure
    assert failure.code == "TRANSPORT"
    assert "cannot set up TLS to verify https://127.0.0.1:9" in failure.message


# ---------------------------------------------------------------------- a real TLS server


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed, so no certificate can be made")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.fixture
async def tls_server(certificate: tuple[Path, Path]) -> AsyncIterator[str]:
    """An HTTPS server on 127.0.0.1 that answers every request 401."""
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            body = b'{"error": {"message": "bad key"}}'
            writer.write(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass  # a client that refused the certificate hangs up mid-handshake
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_server_with_an_untrusted_certificate_is_refused(
    no_proxy: None, tls_server: str
) -> None:
    failure = (await failure_from(tls_server)).failure
    assert failure.code == "TRANSPORT"
    assert "CERTIFICATE_VERIFY_FAILED" in failure.message


async def test_a_certificate_trusted_through_ssl_cert_file_is_accepted(
    no_proxy: None,
    tls_server: str,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    failure = (await failure_from(tls_server)).failure
    assert failure.code != "TRANSPORT"  # the handshake passed: the server's 401 came back
    assert "bad key" in failure.message
