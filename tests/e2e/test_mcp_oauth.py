"""OAuth for remote MCP servers, end to end: the real binary, the SDK-built fixture
server over Streamable HTTP protected by the SDK's server auth (an authorization
server that approves at once), and ``$BROWSER`` a small script that follows the
authorization URL back to dsh's callback, so the whole flow runs for real.

Every attack test asserts what did not happen: no browser, no request carrying a
token, no token stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import SETTINGS, Dsh, finish, interrupt, text_of
from tests.plugins.bash_support import eventually
from tests.support.waits import HANG_S

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"
READY = re.compile(r"remote: ready, \d+ tools")

FOLLOW = """\
import pathlib, sys, urllib.request
pathlib.Path({marker!r}).write_text("ran")
urllib.request.urlopen(sys.argv[1]).read()  # /authorize, redirected to dsh's callback
"""

# The authorization server's answer, with another state: what a page that makes the
# browser call dsh's port with a code of its own choosing would send.
FORGE = """\
import pathlib, sys, urllib.error, urllib.parse, urllib.request
pathlib.Path({marker!r}).write_text("ran")

class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

try:
    urllib.request.build_opener(Stay).open(sys.argv[1])
    raise SystemExit("no redirect")
except urllib.error.HTTPError as answer:
    location = answer.headers["Location"]
parts = urllib.parse.urlsplit(location)
query = urllib.parse.parse_qs(parts.query)
query["state"] = ["forged"]
forged = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, doseq=True)))
try:
    status = urllib.request.urlopen(forged).status
except urllib.error.HTTPError as refused:
    status = refused.code
pathlib.Path({status!r}).write_text(str(status))
"""


@dataclass
class Served:
    url: str
    grants: Path
    """The authorization server's grants, one a line: register, authorize, token, refresh."""
    requests: Path
    """Every HTTP request: method, path, Authorization header."""

    def grant_lines(self) -> list[str]:
        return self.grants.read_text().split() if self.grants.exists() else []

    def request_lines(self) -> list[str]:
        return self.requests.read_text().splitlines() if self.requests.exists() else []


@contextlib.asynccontextmanager
async def served(root: Path, name: str, *extra: str) -> AsyncIterator[Served]:
    grants, requests = root / f"{name}-grants.txt", root / f"{name}-requests.txt"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(FIXTURE),
        "http",
        "--oauth",
        "--record",
        str(grants),
        "--record-auth",
        str(requests),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), HANG_S)
        port = int(line.decode().split()[1])
        yield Served(f"http://127.0.0.1:{port}/mcp", grants, requests)
    finally:
        child.kill()
        await asyncio.wait_for(child.wait(), HANG_S)


@pytest.fixture
async def remote(dsh: Dsh) -> AsyncIterator[Served]:
    async with served(dsh.root, "remote") as server:
        yield server


def browser(dsh: Dsh, monkeypatch: pytest.MonkeyPatch, script: str, **paths: Path) -> Path:
    """``$BROWSER`` for the children: ``script``, which writes the returned marker."""
    marker = dsh.root / "browser-ran"
    program = dsh.root / "browser.py"
    formatted = script.format(marker=str(marker), **{k: str(v) for k, v in paths.items()})
    program.write_text(f"#!{sys.executable}\n{formatted}")
    program.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(program))
    return marker


def configure(dsh: Dsh, *servers: tuple[str, str]) -> None:
    tables = "".join(f'[mcp.servers.{name}]\nurl = "{url}"\n' for name, url in servers)
    (dsh.home / "settings.toml").write_text(SETTINGS + tables)


def stored(dsh: Dsh) -> list[dict[str, object]]:
    folder = dsh.home / "mcp-auth"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def access_token(dsh: Dsh) -> str:
    [entry] = stored(dsh)
    tokens = entry["tokens"]
    assert isinstance(tokens, dict)
    return str(tokens["access_token"])


async def log_in(dsh: Dsh, name: str = "remote") -> None:
    done = await dsh.run("mcp", "login", name)
    assert done.code == 0, done.stdout + done.stderr
    assert re.search(rf"^logged in to {name} \(\d+ tools\)$", done.stdout, re.M), done.stdout


async def test_login_then_the_model_calls_the_servers_tool(
    dsh: Dsh, fake_llm: FakeLLM, remote: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = browser(dsh, monkeypatch, FOLLOW)
    configure(dsh, ("remote", remote.url))
    login = await dsh.run("mcp", "login", "remote")
    assert login.code == 0, login.stdout + login.stderr
    assert re.search(r"^logged in to remote \(\d+ tools\)$", login.stdout, re.M)
    assert marker.exists()  # the browser ran, and the whole flow with it
    assert remote.grant_lines() == ["register", "authorize", "token"]
    folder = dsh.home / "mcp-auth"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    [path] = folder.glob("*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = access_token(dsh)
    assert token not in login.stdout + login.stderr

    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__remote__echo", arguments='{"text": "hi"}')]),
        Reply(text="It said hi."),
    )
    done = await dsh.run("-p", "ask the remote server")
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "It said hi.\n"
    answer = [
        text_of(m) for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert answer == ["echo: hi"]
    assert f"Bearer {token}" in remote.request_lines()[-1]
    assert "mcp:" not in done.stderr

    listed = await dsh.run("mcp", "list")
    assert READY.match(listed.stdout), listed.stdout
    shown = await dsh.run("-p", "/mcp")
    for text in (done.stdout, done.stderr, listed.stdout, listed.stderr, shown.stdout):
        assert token not in text
    # Nor in anything else dsh keeps: the session logs, blobs, settings.
    for kept in dsh.home.rglob("*"):
        if kept.is_file() and kept != path:
            assert token.encode() not in kept.read_bytes(), kept
    assert remote.grant_lines() == ["register", "authorize", "token"]  # no second login

    logout = await dsh.run("mcp", "logout", "remote")
    assert logout.code == 0, logout.stderr
    assert "logged out of remote" in logout.stdout
    assert not path.exists()
    again = await dsh.run("mcp", "logout", "remote")
    assert again.code == 1
    assert "no stored login for 'remote'" in again.stderr
    # A new login registers dsh again (its callback is at another port now).
    await log_in(dsh)
    assert remote.grant_lines() == ["register", "authorize", "token"] * 2
    assert access_token(dsh) != token


async def test_without_a_login_the_server_waits_for_one_and_no_browser_opens(
    dsh: Dsh, fake_llm: FakeLLM, remote: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = browser(dsh, monkeypatch, FOLLOW)
    configure(dsh, ("remote", remote.url))
    with (dsh.home / "settings.toml").open("a") as out:
        out.write(
            f"[mcp.servers.local]\ncommand = {json.dumps(sys.executable)}\n"
            f'args = [{json.dumps(str(FIXTURE))}, "stdio"]\n'
        )
    fake_llm.add(Reply(text="Fine."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "Fine.\n"
    assert "mcp: remote needs login: run `dsh mcp login remote`" in done.stderr
    offered = [t["function"]["name"] for t in fake_llm.chat_requests[0].body["tools"]]
    assert "mcp__local__echo" in offered
    assert not any(name.startswith("mcp__remote__") for name in offered)
    # Nothing of a login happened: no browser, no discovery, registration or grant.
    assert not marker.exists()
    assert remote.grant_lines() == []
    assert all(line.startswith("POST /mcp ") for line in remote.request_lines())

    listed = await dsh.run("mcp", "list")
    assert "remote: needs login (" in listed.stdout
    assert "  run `dsh mcp login remote`" in listed.stdout
    assert re.search(r"^local: ready, \d+ tools", listed.stdout, re.M), listed.stdout
    got = await dsh.run("mcp", "get", "remote")
    assert got.code == 1
    assert "remote: needs login" in got.stdout
    shown = await dsh.run("-p", "/mcp")
    assert "remote: needs login (" in shown.stdout + shown.stderr
    assert not marker.exists()
    assert stored(dsh) == []


async def test_a_token_is_never_sent_to_another_url_or_server_name(
    dsh: Dsh, remote: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser(dsh, monkeypatch, FOLLOW)
    configure(dsh, ("remote", remote.url))
    await log_in(dsh)
    token = access_token(dsh)
    async with served(dsh.root, "elsewhere") as elsewhere:
        # The same name pointed at another URL: that server sees no token at all.
        configure(dsh, ("remote", elsewhere.url))
        listed = await dsh.run("mcp", "list")
        assert "remote: needs login" in listed.stdout
        assert elsewhere.request_lines(), "dsh never asked the other server"
        assert all(line.endswith(" -") for line in elsewhere.request_lines())
        assert token not in elsewhere.requests.read_text()
    # Another name for the same URL: no token either.
    before = len(remote.request_lines())
    configure(dsh, ("renamed", remote.url))
    listed = await dsh.run("mcp", "list")
    assert "renamed: needs login" in listed.stdout
    after = remote.request_lines()[before:]
    assert after
    assert all(line.endswith(" -") for line in after)
    # The first login is still there for the first name and URL, untouched.
    configure(dsh, ("remote", remote.url))
    assert access_token(dsh) == token
    listed = await dsh.run("mcp", "list")
    assert READY.match(listed.stdout), listed.stdout
    # Logging in again with a working token changes nothing.
    grants = remote.grant_lines()
    again = await dsh.run("mcp", "login", "remote")
    assert again.code == 0, again.stderr
    assert "remote is ready: already logged in" in again.stdout
    assert remote.grant_lines() == grants
    assert access_token(dsh) == token


async def test_a_callback_with_another_state_is_refused_and_nothing_stored(
    dsh: Dsh, remote: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = dsh.root / "forged-status"
    browser(dsh, monkeypatch, FORGE, status=status)
    configure(dsh, ("remote", remote.url))
    child = await dsh.start("mcp", "login", "remote")
    await eventually(lambda: status.exists() and status.read_text() != "")
    assert status.read_text() == "400"
    interrupt(child)  # Ctrl+C: the login waits no longer
    done = await finish(child)
    assert done.code == 130, done.stdout + done.stderr
    assert "dsh mcp: login cancelled" in done.stderr
    assert "logged in" not in done.stdout
    # The forged code was never exchanged, and no token is stored.
    assert "token" not in remote.grant_lines()
    assert not any(line.startswith("POST /token") for line in remote.request_lines())
    assert all("tokens" not in entry for entry in stored(dsh))


async def test_an_expired_token_is_refreshed_without_a_login(
    dsh: Dsh, remote: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = browser(dsh, monkeypatch, FOLLOW)
    configure(dsh, ("remote", remote.url))
    await log_in(dsh)
    old = access_token(dsh)
    marker.unlink()
    [path] = (dsh.home / "mcp-auth").glob("*.json")
    entry = json.loads(path.read_text())
    entry["expires_at"] = 1.0  # as if its hour had passed
    path.write_text(json.dumps(entry))
    listed = await dsh.run("mcp", "list")
    assert READY.match(listed.stdout), listed.stdout
    assert remote.grant_lines() == ["register", "authorize", "token", "refresh"]
    new = access_token(dsh)
    assert new != old
    assert not any(old in line for line in remote.request_lines()[-3:])
    assert not marker.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_login_refuses_stdio_and_unknown_servers(dsh: Dsh) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS
        + f"[mcp.servers.local]\ncommand = {json.dumps(sys.executable)}\n"
        + f'args = [{json.dumps(str(FIXTURE))}, "stdio"]\n'
        + '[mcp.servers.keyed]\nurl = "http://127.0.0.1:1/mcp"\n'
        + 'headers = { Authorization = "Bearer ${NOPE:-x}" }\n'
    )
    local = await dsh.run("mcp", "login", "local")
    assert local.code == 1
    assert "local is a stdio server" in local.stderr
    keyed = await dsh.run("mcp", "login", "keyed")
    assert keyed.code == 1
    assert "sends an Authorization header of its own" in keyed.stderr
    missing = await dsh.run("mcp", "login", "nothere")
    assert missing.code == 1
    assert "no server named 'nothere'" in missing.stderr
    assert not (dsh.home / "mcp-auth").exists()


CANARY = "at-canary-token-5f0c2e91d7"


def call(name: str, **arguments: object) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


async def test_no_tool_reads_or_writes_the_tokens_even_in_bypass(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    folder = dsh.home / "mcp-auth"
    folder.mkdir(mode=0o700)
    token_file = folder / "remote-0123.json"
    token_file.write_text(
        json.dumps(
            {
                "server": "remote",
                "url": "https://mcp.example/mcp",
                "tokens": {"access_token": CANARY, "refresh_token": "rt-canary-refresh-81"},
            }
        )
    )
    (dsh.project / "innocent.json").symlink_to(token_file)
    planted = folder / "planted.json"
    fake_llm.add(
        call("read", file_path=str(token_file)),
        call("read", file_path="innocent.json"),
        call("grep", pattern="canary", path=str(folder)),
        call("bash", command="cat $DSH_HOME/mcp-auth/*.json", description="look"),
        call("write", file_path=str(planted), content="{}"),
        # Wider or roundabout: each runs, and its result is withheld.
        call("grep", pattern="canary", path=str(dsh.root)),
        call("bash", command="cd $DSH_HOME && cat m*/r*", description="look"),
        call("read", file_path=str(dsh.home / "settings.toml")),  # the control
        Reply(text="Nothing there."),
    )

    done = await dsh.run("-p", "find the tokens", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert not any(CANARY.encode() in r.raw for r in fake_llm.requests), "sent to the model"
    assert not any(b"rt-canary-refresh-81" in r.raw for r in fake_llm.requests)
    logged = [
        p
        for p in dsh.home.rglob("*")
        if p.is_file() and p != token_file and CANARY.encode() in p.read_bytes()
    ]
    assert logged == [], "a token is in a file dsh wrote"
    assert not planted.exists()
    texts = [text_of(m) for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert "tests.support.echo_tool" in texts[-1]  # other files are read: not vacuous
    for denied in texts[:5]:
        assert "was blocked" in denied, denied
        assert "MCP login tokens are kept there" in denied, denied
    assert "the result held an MCP login token of dsh" in texts[5], texts[5]
    # The command runs in the sandbox, where $DSH_HOME is out of sight.
    assert "No such file or directory" in texts[6], texts[6]
