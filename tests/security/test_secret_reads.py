"""Secret files are not read to the model.

dsh's own keys (``$DSH_HOME/credentials.json`` and ``.env``), its trust store and its
installation key never reach the provider, in any mode (bypass included), by any tool:
``read`` (by path, or through a symlink in the project), ``grep`` and ``glob`` (which
leave them out of a wider search and say so), an ``@`` mention, ``lsp``, or a plain
``cat`` through bash. Each attack checks the side effect: the canary key is in none of
the requests the scripted server received, and in no file of the session log.

Secret stores outside the project (``~/.ssh``, ``~/.aws``...) are read only when asked:
headless, the read is denied with the reason; in bypass mode it runs. Two such reads
in one step (read-only calls run side by side) are both asked.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh.credentials import CredentialStore
from dsh.llm import user_text
from dsh.paths import dsh_home
from dsh.runtime import start_runtime
from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from tests.e2e.harness import Dsh, of_type
from tests.plugins.lsp_fixtures.harness import FAKE_SERVER

CANARY = "sk-secret-canary-4b1d9e77a0c3"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-canary-58c2f1\n"
NEVER = "no tool may read or change it, in any mode"


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    """An installation with a stored key, and a home folder (the test's root, so
    ``~/home`` is ``$DSH_HOME``) holding an SSH key."""
    CredentialStore(dsh.home, dsh.project).set("OTHER_API_KEY", CANARY)
    (dsh.home / ".env").write_text(f"ANOTHER_API_KEY={CANARY}\n")
    (dsh.root / ".ssh").mkdir()
    (dsh.root / ".ssh" / "id_rsa").write_text(SSH_KEY)
    dsh.environment["HOME"] = str(dsh.root)
    return dsh


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def bash(command: str) -> Reply:
    return call("bash", command=command, description="look")


def sent(server: FakeLLM, secret: str) -> bool:
    """Whether any request the server received carried ``secret``."""
    return any(secret.encode() in request.raw for request in server.requests)


def logged(dsh: Dsh, secret: str) -> list[Path]:
    """The files under ``$DSH_HOME`` holding ``secret``, but where it is stored."""
    stored = {dsh.home / "credentials.json", dsh.home / ".env"}
    return [
        path
        for path in dsh.home.rglob("*")
        if path.is_file() and path not in stored and secret.encode() in path.read_bytes()
    ]


def tool_texts(server: FakeLLM) -> list[str]:
    body = server.chat_requests[-1].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


# ---------------------------------------------------------------------- dsh's keys


@pytest.mark.parametrize("mode", ["default", "read-only", "bypass"])
async def test_no_file_tool_reads_dsh_keys_in_any_mode(
    dsh: Dsh, fake_llm: FakeLLM, mode: str
) -> None:
    (dsh.project / "notes.json").symlink_to(dsh.home / "credentials.json")
    (dsh.project / "keys").symlink_to(dsh.home, target_is_directory=True)
    fake_llm.add(
        call("read", file_path=str(dsh.home / "credentials.json")),
        call("read", file_path="~/home/credentials.json"),
        call("read", file_path="notes.json"),
        call("read", file_path="keys/.env"),
        call("grep", pattern="sk-", path=str(dsh.home / "credentials.json")),
        call("grep", pattern="sk-", path="keys"),
        call("glob", pattern="*", path=str(dsh.home)),
        call("read", file_path=str(dsh.home / "settings.toml")),  # the control
        Reply(text="Nothing there."),
    )

    done = await dsh.run("-p", "find the keys", "--permission-mode", mode)

    assert done.code == 0, done.stderr
    assert not sent(fake_llm, CANARY), "the key reached the provider"
    assert logged(dsh, CANARY) == [], "the key is in the session log"
    texts = tool_texts(fake_llm)
    assert "tests.support.echo_tool" in texts[-1]  # other files are read: not vacuous
    for refused in texts[:5]:
        assert refused.startswith("Error: read is not allowed") or refused.startswith(
            "Error: grep is not allowed"
        ), refused
        assert NEVER in refused
    grep_in_home, glob_in_home = texts[5], texts[6]
    assert "1 file left out: dsh's own keys" in grep_in_home, grep_in_home
    assert "credentials.json" not in glob_in_home
    assert ".env" not in glob_in_home
    assert "settings.toml" in glob_in_home, glob_in_home
    assert "files left out" in glob_in_home, glob_in_home


async def test_a_search_of_a_folder_holding_dsh_home_leaves_the_keys_out(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    (dsh.project / "config.py").write_text('API_KEY = "sk-not-a-real-key"\n')
    fake_llm.add(call("grep", pattern="sk-", path=str(dsh.root)), Reply(text="Found one."))

    done = await dsh.run("-p", "grep for keys everywhere")

    assert done.code == 0, done.stderr
    assert not sent(fake_llm, CANARY)
    [found] = tool_texts(fake_llm)
    assert "sk-not-a-real-key" in found  # the search ran
    assert "1 file left out: dsh's own keys" in found, found


async def test_bash_cannot_cat_dsh_keys_even_in_bypass(dsh: Dsh, fake_llm: FakeLLM) -> None:
    credentials = dsh.home / "credentials.json"
    fake_llm.add(
        bash("cat $DSH_HOME/credentials.json"),
        bash('cat "${DSH_HOME}/credentials.json"'),
        bash("cat ~/home/credentials.json"),
        bash(f"base64 < {credentials}"),
        bash("grep -h sk- $DSH_HOME/*"),
        bash("cat $DSH_HOME/.env"),
        bash("echo ok"),  # the control
        Reply(text="Could not."),
    )

    done = await dsh.run("-p", "print the keys", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert not sent(fake_llm, CANARY), "the key reached the provider"
    assert logged(dsh, CANARY) == []
    texts = tool_texts(fake_llm)
    assert texts[-1].strip() == "ok"
    for refused in texts[:-1]:
        assert refused.startswith("Error: bash is not allowed"), refused
        assert NEVER in refused


async def test_a_terminal_cannot_show_dsh_keys_even_in_bypass(dsh: Dsh, fake_llm: FakeLLM) -> None:
    credentials = dsh.home / "credentials.json"
    fake_llm.add(
        call("terminal_open", command=f"cat {credentials}"),
        call("terminal_open"),
        call("terminal_send", terminal_id="t1", text=f"cat {credentials}\n"),
        call("terminal_send", terminal_id="t1", text="cat ~/home/.env\n"),
        call("terminal_send", terminal_id="t1", text="echo control-$((6*7))\n"),
        call("terminal_read", terminal_id="t1", wait="pattern", pattern="control-42"),
        call("terminal_close", terminal_id="t1"),
        Reply(text="Could not."),
    )

    done = await dsh.run("-p", "print the keys", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert not sent(fake_llm, CANARY), "the key reached the provider"
    texts = tool_texts(fake_llm)
    for refused in (texts[0], texts[2], texts[3]):
        assert refused.startswith("Error: terminal_"), refused
        assert NEVER in refused
    assert "control-42" in texts[4] + texts[5]  # the terminal itself works


async def test_a_mention_of_dsh_keys_attaches_nothing(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="I see no keys."))

    # Working in the folder that holds $DSH_HOME, so the mention is inside it.
    done = await dsh.run("-p", "what is in @home/credentials.json and @home/.env?", cwd=dsh.root)

    assert done.code == 0, done.stderr
    assert not sent(fake_llm, CANARY)
    assert logged(dsh, CANARY) == []
    request = str(fake_llm.chat_requests[-1].body)
    assert "@home/credentials.json: not read: dsh's stored API keys" in request


# ---------------------------------------------------------------------- secret stores


@pytest.mark.parametrize("mode", ["default", "read-only", "accept-edits"])
async def test_a_secret_store_is_asked_for_and_denied_headless(
    dsh: Dsh, fake_llm: FakeLLM, mode: str
) -> None:
    fake_llm.add(
        call("read", file_path="~/.ssh/id_rsa"),
        call("grep", pattern="PRIVATE", path="~/.ssh"),
        call("glob", pattern="*", path="~"),
        Reply(text="Could not."),
    )

    done = await dsh.run("-p", "show my ssh key", "--permission-mode", mode)

    assert done.code == 0, done.stderr
    assert not sent(fake_llm, "ssh-canary-58c2f1")
    read, grep, glob = tool_texts(fake_llm)
    assert read == (
        "Error: read was not run: no one is here to approve it (headless); reads "
        "~/.ssh/id_rsa: it holds your SSH keys; only --permission-mode bypass allows it unasked"
    )
    assert grep.startswith("Error: grep was not run")
    assert "your SSH keys" in grep
    # A wider search runs, without the store's files (nor dsh's keys, in ~/home).
    assert "id_rsa" not in glob, glob
    assert "credentials.json" not in glob, glob
    assert "home/settings.toml" in glob, glob
    assert "3 files left out" in glob, glob
    events = await dsh.checked_events()
    asked = [e.data.reason for e in of_type(events, "approval/requested")]
    assert asked == [
        "reads ~/.ssh/id_rsa: it holds your SSH keys",
        "reads ~/.ssh: it holds your SSH keys",
    ]


async def test_bypass_reads_a_secret_store(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(call("read", file_path="~/.ssh/id_rsa"), Reply(text="Here it is."))

    done = await dsh.run("-p", "show my ssh key", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert "ssh-canary-58c2f1" in tool_texts(fake_llm)[0]


# ---------------------------------------------------------------------- in process


def _calls(*calls: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=n, arguments=a) for n, a in calls])


async def test_lsp_refuses_dsh_keys_before_any_server_starts(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    home = dsh_home()
    CredentialStore(home, tmp_path).set("OTHER_API_KEY", CANARY)
    log = tmp_path / "server.log"  # every message a server gets, had one started
    server = [sys.executable, str(FAKE_SERVER), "hang", str(log)]
    lsp = {"servers": {"data": {"command": server, "extensions": [".json", ".toml"]}}}
    runtime = await start_runtime(
        home=home,
        cwd=tmp_path,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "lsp": {**lsp, "request_timeout_s": 1},
        },
        permission_mode="bypass",
    )
    where = {"line": 1, "character": 1}
    try:
        fake_llm.add(
            _calls(
                (
                    "lsp",
                    {"operation": "hover", "file_path": str(home / "credentials.json"), **where},
                ),
                ("lsp", {"operation": "hover", "file_path": str(home / "trust.toml"), **where}),
            ),
            Reply(text="Nothing."),
        )
        agent = await runtime.agents.create(tmp_path)
        agent.followup(user_text("look"))
        await agent.when_idle()
        assert not sent(fake_llm, CANARY)
        texts = tool_texts(fake_llm)
        assert all(t.startswith("Error: lsp is not allowed") and NEVER in t for t in texts), texts
        assert not log.exists(), "a language server was started and shown the file"
    finally:
        await runtime.aclose()


async def test_secret_reads_side_by_side_are_each_asked(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_text(SSH_KEY)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("aws-canary-7d\n")
    (tmp_path / "project").mkdir()
    runtime = await start_runtime(
        home=dsh_home(),
        cwd=tmp_path / "project",
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
        permission_mode="read-only",
    )
    pending: list[ApprovalRequest] = []
    both = asyncio.Event()

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        # Both reads are asked before either is answered: they run side by side.
        pending.append(request)
        if len(pending) == 2:
            both.set()
        await both.wait()
        return ApprovalDecision(outcome="allow_once")

    try:
        runtime.root.get(APPROVALS).add_approver(approver)
        fake_llm.add(
            _calls(
                ("read", {"file_path": "~/.ssh/id_rsa"}),
                ("read", {"file_path": "~/.aws/credentials"}),
                ("read", {"file_path": "~/.ssh/../notes.txt"}),  # not a store: not asked
            ),
            Reply(text="Read them."),
        )
        agent = await runtime.agents.create(tmp_path / "project")
        agent.followup(user_text("read my keys"))
        await asyncio.wait_for(agent.when_idle(), 30)
        assert sorted(r.reason or "" for r in pending) == [
            "reads ~/.aws/credentials: it holds your AWS credentials",
            "reads ~/.ssh/id_rsa: it holds your SSH keys",
        ]
        assert all(r.grant is None for r in pending)  # never "for this session"
        texts = tool_texts(fake_llm)
        assert "ssh-canary-58c2f1" in texts[0]
        assert "aws-canary-7d" in texts[1]
        assert "does not exist" in texts[2]
    finally:
        await runtime.aclose()


async def test_a_search_inside_a_store_shows_it_and_a_wider_one_leaves_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tools alone (the policy asked before the first search ran).
    from tests.plugins.fs_harness import Fs

    fs = Fs(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host secret-host\n")
    (tmp_path / "visible.txt").write_text("Host visible-host\n")
    inside = await fs.text("grep", pattern="Host", path="~/.ssh")
    assert "secret-host" in inside
    assert "left out" not in inside
    wider = await fs.text("glob", pattern="*", path="~")
    assert "visible.txt" in wider
    assert ".ssh" not in wider.split("\n\n")[0]
    assert "1 file left out" in wider
    listed = await fs.text("glob", pattern="*", path="~/.ssh")
    assert listed == "config"
