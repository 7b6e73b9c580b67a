"""The chat-completions library the provider plugins share (plugins/_shared): reading
a stream a batch at a time, and TLS to the server, verified against a real TLS server on
127.0.0.1. (What the protocol sends and reads: the provider plugins' tests.)"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.llm import GenerateOptions, LlmError, user_text
from dsh_plugins._shared.chat_body import BACKLOG, ResponseBody, sse_lines
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter

OPTIONS = GenerateOptions(provider="local", model="m", messages=(user_text("hi"),))


async def test_a_trickle_is_read_a_batch_at_a_time_and_a_backlog_straight_through() -> None:
    """After a read that had to wait for a little, the next one waits a moment first
    (what arrives meanwhile then comes in one read); after a backlog it does not."""
    event = b"data: {}\n\n"  # two lines
    backlog = event * (BACKLOG // len(event) + 1)
    script = [
        (0.002, event),  # waited, after nothing: a trickle
        (0.002, event),
        (0.0, backlog),  # there at once
        (0.0, event),
        (0.002, event),  # waited, after a backlog
        (0.002, event),  # waited, after a trickle again
    ]
    now = 0.0
    lines = 0
    paused: list[int] = []

    class Body:
        async def aiter_bytes(self) -> Any:
            nonlocal now
            for waited, data in script:
                now += waited
                yield data

    async def pause(seconds: float) -> None:
        paused.append(lines)

    body = ResponseBody(Body(), idle_s=60.0)
    async for _line in sse_lines(body, clock=lambda: now, pause=pause):
        lines += 1
    backlog_lines = 2 * backlog.count(b"\n\n")
    assert paused == [2, 4, 2 + 2 + backlog_lines + 2 + 2 + 2]


# ---------------------------------------------------------------------- TLS


async def failure_from(base_url: str) -> LlmError:
    adapter = ChatCompletionsAdapter(base_url=base_url, models={}, api_key=lambda: "sk-test")
    try:
        with pytest.raises(LlmError) as raised:
            async for _ in adapter.stream(OPTIONS):
                pass
    finally:
        await adapter.aclose()
    return raised.value


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
