"""The mcp plugin's OAuth parts in process: the token files, the login's callback
listener (real HTTP on 127.0.0.1), and a login over the legacy SSE transport against
the fixture server with the SDK's server auth. ``tests/e2e/test_mcp_oauth.py`` runs
``dsh mcp login`` itself."""

from __future__ import annotations

import asyncio
import contextlib
import stat
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from dsh_plugins.mcp.auth import DshOAuth, FileTokenStorage, auth_dir, forget
from dsh_plugins.mcp.login import Login, LoginFailed
from tests.plugins.test_mcp import call, service_of, started
from tests.support.waits import HANG_S

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


# ---------------------------------------------------------------------- the files


async def test_tokens_are_kept_per_name_and_url_in_private_files(home: Path) -> None:
    storage = FileTokenStorage("tracker", "https://a.example/mcp")
    await storage.set_tokens(OAuthToken(access_token="secret-a", expires_in=60))
    await storage.set_client_info(
        OAuthClientInformationFull(client_id="c1", redirect_uris=["http://127.0.0.1:5/callback"])
    )
    assert stat.S_IMODE(auth_dir().stat().st_mode) == 0o700
    assert stat.S_IMODE(storage.path.stat().st_mode) == 0o600
    assert storage.path.parent == home / "mcp-auth"
    again = FileTokenStorage("tracker", "https://a.example/mcp")
    tokens = await again.get_tokens()
    assert tokens is not None
    assert tokens.access_token == "secret-a"
    assert (await again.get()).expires_at is not None
    client = await again.get_client_info()
    assert client is not None
    assert client.client_id == "c1"
    # Another URL or another name: nothing.
    assert await FileTokenStorage("tracker", "https://b.example/mcp").get_tokens() is None
    assert await FileTokenStorage("tracker2", "https://a.example/mcp").get_tokens() is None
    assert await FileTokenStorage("tracker", "https://b.example/mcp").get_client_info() is None
    # No temporary file left behind.
    assert [p.name for p in auth_dir().iterdir()] == [storage.path.name]


async def test_a_file_that_names_another_server_or_url_is_not_used() -> None:
    mine = FileTokenStorage("tracker", "https://a.example/mcp")
    theirs = FileTokenStorage("tracker", "https://evil.example/mcp")
    await theirs.set_tokens(OAuthToken(access_token="for-evil"))
    # Copied (or linked) to the name the real server's file would have.
    mine.path.write_bytes(theirs.path.read_bytes())
    assert await mine.get_tokens() is None
    mine.path.write_text("not json")
    assert await mine.get_tokens() is None


async def test_forget_deletes_only_that_servers_logins() -> None:
    first = FileTokenStorage("a", "https://one.example/mcp")
    second = FileTokenStorage("a", "https://two.example/mcp")
    other = FileTokenStorage("a-b", "https://one.example/mcp")
    for storage in (first, second, other):
        await storage.set_tokens(OAuthToken(access_token="t"))
    gone = await asyncio.to_thread(forget, "a")
    assert sorted(gone) == sorted([first.path, second.path])
    assert other.path.exists()
    assert await asyncio.to_thread(forget, "a") == []


# ---------------------------------------------------------------------- the callback


@contextlib.asynccontextmanager
async def listening(wait_s: float = HANG_S) -> AsyncIterator[tuple[Login, list[str]]]:
    opened: list[str] = []
    said: list[str] = []
    login = Login("tracker", wait_s=wait_s, say=said.append, open_browser=opened.append)
    await login.start()
    try:
        await login.redirect("https://as.example/authorize?client_id=c&state=the-state")
        assert said[-1] == "https://as.example/authorize?client_id=c&state=the-state"
        yield login, opened
    finally:
        await login.aclose()


async def get(client: httpx.AsyncClient, login: Login, query: str) -> httpx.Response:
    return await client.get(f"{login.redirect_uri}{query}")


async def test_the_callback_takes_only_the_answer_to_its_own_state() -> None:
    async with listening() as (login, opened), httpx.AsyncClient(trust_env=False) as client:
        assert login.redirect_uri.startswith("http://127.0.0.1:")
        forged = await get(client, login, "?code=attacker-code&state=forged")
        assert forged.status_code == 400
        assert "nothing was changed" in forged.text
        stateless = await get(client, login, "?code=attacker-code")
        assert stateless.status_code == 400
        elsewhere = await client.get(f"http://127.0.0.1:{login.port}/other?state=the-state")
        assert elsewhere.status_code == 404
        posted = await client.post(f"{login.redirect_uri}?code=c&state=the-state")
        assert posted.status_code == 400
        waiting = asyncio.ensure_future(login.callback())
        await asyncio.sleep(0)
        assert not waiting.done()  # none of those was taken

        good = await get(client, login, "?code=the-code&state=the-state&iss=https://as.example")
        assert good.status_code == 200
        assert "You can close this tab" in good.text
        assert "the-code" not in good.text
        assert "the-state" not in good.text
        result = await asyncio.wait_for(waiting, HANG_S)
        assert (result.code, result.state, result.iss) == (
            "the-code",
            "the-state",
            "https://as.example",
        )
        late = await get(client, login, "?code=other&state=the-state")
        assert late.status_code == 410
        await eventually_opened(opened)


async def eventually_opened(opened: list[str]) -> None:
    from tests.plugins.bash_support import eventually

    await eventually(lambda: bool(opened))
    assert opened == ["https://as.example/authorize?client_id=c&state=the-state"]


async def test_a_refusal_from_the_server_ends_the_login() -> None:
    async with listening() as (login, _), httpx.AsyncClient(trust_env=False) as client:
        answer = await get(client, login, "?error=access_denied&state=the-state")
        assert answer.status_code == 200
        with pytest.raises(LoginFailed, match="the server refused: access_denied"):
            await asyncio.wait_for(login.callback(), HANG_S)


async def test_no_answer_ends_the_login_after_its_wait() -> None:
    async with listening(wait_s=0.01) as (login, _):
        with pytest.raises(LoginFailed, match="no answer from the browser"):
            await login.callback()


# ---------------------------------------------------------------------- over SSE


@contextlib.asynccontextmanager
async def with_oauth(root: Path, transport: str) -> AsyncIterator[tuple[str, Path, Path]]:
    """The fixture server behind the SDK's server auth: its URL, the file of its
    requests (with their Authorization headers) and the file of its grants."""
    requests, grants = root / "requests.txt", root / "grants.txt"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(FIXTURE),
        transport,
        "--oauth",
        "--record-auth",
        str(requests),
        "--record",
        str(grants),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    path = "/mcp" if transport == "http" else "/sse"
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), HANG_S)
        yield f"http://127.0.0.1:{int(line.decode().split()[1])}{path}", requests, grants
    finally:
        child.kill()
        await asyncio.wait_for(child.wait(), HANG_S)


def follow(url: str) -> None:
    """The browser: the authorization URL, redirected to the callback."""
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url).read()


async def test_an_sse_server_needs_a_login_then_works_with_one(tmp_path: Path) -> None:
    async with with_oauth(tmp_path, "sse") as (url, requests, _):
        runtime = await started(tmp_path, f'[mcp.servers.old]\ntype = "sse"\nurl = "{url}"\n')
        try:
            service = service_of(runtime)
            await asyncio.wait_for(service.settled(), HANG_S)
            [status] = service.statuses()
            assert (status.state, status.reason) == ("needs login", "run `dsh mcp login old`")
            assert status.tools == []

            login = Login("old", say=lambda _: None, open_browser=follow)
            await login.start()
            try:
                connection = service.login("old", login)
                assert connection is not None
                await asyncio.wait_for(connection.settled.wait(), HANG_S)
            finally:
                await login.aclose()
            assert connection.state == "ready", connection.reason
            text, _ = await call(runtime, tmp_path, "mcp__old__echo", {"text": "logged in"})
            assert text == "echo: logged in"
            token = await FileTokenStorage("old", url).get_tokens()
            assert token is not None
            assert f"Bearer {token.access_token}" in requests.read_text()
        finally:
            await runtime.aclose()


async def test_a_token_another_dsh_refreshed_is_taken_not_refreshed_again(
    tmp_path: Path,
) -> None:
    async with with_oauth(tmp_path, "http") as (url, requests, grants):
        runtime = await started(tmp_path, f'[mcp.servers.remote]\nurl = "{url}"\n')
        try:
            await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
            login = Login("remote", say=lambda _: None, open_browser=follow)
            await login.start()
            try:
                connection = service_of(runtime).login("remote", login)
                assert connection is not None
                await asyncio.wait_for(connection.settled.wait(), HANG_S)
            finally:
                await login.aclose()
            assert connection.state == "ready", connection.reason
        finally:
            await runtime.aclose()
        probe = url.replace("/mcp", "/probe")
        storage = FileTokenStorage("remote", url)
        errors: list[Exception] = []
        first = DshOAuth(storage, on_error=errors.append)
        async with httpx2.AsyncClient(auth=first) as client:
            await client.get(probe)
        # Another dsh finds the token expired and refreshes it; the refresh token the
        # first one holds is spent.
        storage.write(storage.read().model_copy(update={"expires_at": 1.0}))
        async with httpx2.AsyncClient(auth=DshOAuth(storage, on_error=errors.append)) as client:
            await client.get(probe)
        assert grants.read_text().split() == ["register", "authorize", "token", "refresh"]
        refreshed = storage.read().tokens
        assert refreshed is not None
        # The first one's token expires too: it takes the refreshed one from the file.
        first.context.token_expiry_time = 1.0
        async with httpx2.AsyncClient(auth=first) as client:
            await client.get(probe)
        assert grants.read_text().split() == ["register", "authorize", "token", "refresh"]
        last = requests.read_text().splitlines()[-1]
        assert last == f"GET /probe Bearer {refreshed.access_token}"
        assert errors == []


async def test_the_guard_knows_a_token_this_process_stored_at_once() -> None:
    from dsh_plugins.mcp.guard import TokenWatch

    watch = TokenWatch()
    assert await watch.current() == frozenset()
    storage = FileTokenStorage("tracker", "https://a.example/mcp")
    await storage.set_tokens(OAuthToken(access_token="at-first-token", refresh_token="rt-first"))
    # Within the second in which the folder is not looked at again: this process
    # said it stored one.
    assert await watch.current() == {"at-first-token", "rt-first"}
    await storage.set_tokens(OAuthToken(access_token="at-second-token"))
    assert "at-second-token" in await watch.current()
