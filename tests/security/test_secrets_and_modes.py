"""The API key stays in, and what dsh keeps is private. End to end, through ``dsh -p``.

A canary key is used for real (the scripted server requires it), from the environment
and from the credentials file. The server echoes it back in error bodies and headers,
as some providers and proxies do; the model runs ``env`` and ``echo $DEEPSEEK_API_KEY``
through the bash tool and floods enough output to spill to a file. Afterwards the key
is in no file under the data directory (but the credentials file it was stored in)
or the project, and in none of what any command printed (text, json, stream-json,
``dsh sessions``).

Files: run with ``umask 000`` (the least private a user could set), every file dsh
made under ``$DSH_HOME`` (session logs, the catalog and its WAL, spill files,
credentials and their lock) is 0600, and every folder (``$DSH_HOME`` included) 0700.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from dsh.credentials import CredentialStore
from dsh.testing import FakeLLM, Fault, Reply, Script, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh, Finished, finish

CANARY = "sk-canary-7f3e91c2d4b54a8e"
UMASK_0 = "import os, sys\nos.umask(0)\nos.execv(sys.argv[1], sys.argv[1:])\n"


def bash(command: str) -> Reply:
    return Reply(
        tool_calls=[ToolCallSpec(name="bash", arguments={"command": command, "description": "x"})]
    )


def echoes() -> list[Reply]:
    """A conversation in which the key is echoed, printed and spilled where possible."""
    echoed = {"error": {"message": f"Rate limited for key {CANARY}", "type": "rate_limit"}}
    headers = {"x-request-id": f"req-{CANARY}", "x-echo-authorization": f"Bearer {CANARY}"}
    return [
        Reply(fault=Fault(status=429, body=echoed, retry_after=0.05, headers=headers)),
        bash(f'env; echo "key=$DEEPSEEK_API_KEY"; printenv | grep -c {CANARY[:10]} || true'),
        # Refused since issue 35 (a process's environment is read by no tool); the
        # output that spills comes from the call after it.
        bash("cat /proc/self/environ | tr '\\0' '\\n'"),
        bash("env | tr '\\0' '\\n'; head -c 200000 /dev/zero | tr '\\0' k"),
        Reply(text="All clear."),
    ]


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(Script(require_key=CANARY)) as started:
        yield started


@pytest.fixture
def home_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A data directory dsh makes itself (not there yet), and the project."""
    project = tmp_path / "project"
    project.mkdir()
    return tmp_path / "data" / "dsh-home", project


async def run(
    server: FakeLLM, home: Path, project: Path, *args: str, key: str | None, umask_0: bool = False
) -> Finished:
    dsh = Dsh.__new__(Dsh)  # the harness's environment, with a home it did not make
    dsh.root, dsh.server, dsh.key, dsh.children = home.parent, server, key, []
    dsh.environment = {}
    env = {**dsh.env(), "DSH_HOME": str(home)}
    prefix = [sys.executable, "-c", UMASK_0] if umask_0 else []
    child = await asyncio.create_subprocess_exec(
        *prefix,
        sys.executable,
        "-m",
        "dsh",
        *args,
        cwd=project,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        return await finish(child, None)
    finally:
        if child.returncode is None:
            child.kill()
            await asyncio.wait_for(child.wait(), TIMEOUT)


def leaks(root: Path, *, allowed: set[Path] = frozenset()) -> list[Path]:  # type: ignore[assignment]
    found = []
    for path in root.rglob("*"):
        readable = path.is_file() and not path.is_symlink() and path not in allowed
        if readable and CANARY.encode() in path.read_bytes():
            found.append(path)
    return found


@pytest.mark.parametrize("source", ["environment", "credentials-file"])
async def test_the_canary_key_leaks_nowhere(
    server: FakeLLM, home_dirs: tuple[Path, Path], source: str
) -> None:
    home, project = home_dirs
    key: str | None = CANARY
    allowed: set[Path] = set()
    if source == "credentials-file":
        CredentialStore(home, project).set("DEEPSEEK_API_KEY", CANARY)
        allowed = {home / "credentials.json"}
        key = None
    server.add(*echoes())
    outputs: list[Finished] = []
    bypass = ("--permission-mode", "bypass")
    for output_format in ("text", "json", "stream-json"):
        server.add(*echoes()[1:]) if output_format != "text" else None
        outputs.append(
            await run(
                server, home, project, "-p", "check the env", *bypass,
                "--output-format", output_format, key=key,
            )
        )  # fmt: skip
    assert [o.code for o in outputs] == [0, 0, 0], [o.stderr for o in outputs]
    # The key did its job, and the bash tool's environment did not carry it.
    assert server.requests[-1].headers["authorization"] == f"Bearer {CANARY}"
    assert "key=\n" in outputs[-1].stdout.replace("\\n", "\n")
    # A rejected key, echoed back in the body and headers, ends the run with one line.
    rejected = Fault(
        status=401,
        body={"error": {"message": f"Incorrect API key provided: {CANARY}"}},
        headers={"x-request-id": CANARY},
    )
    server.add(Reply(fault=rejected))
    outputs.append(await run(server, home, project, "-p", "again", key=key))
    assert outputs[-1].code == 1
    assert "Incorrect API key provided: ***" in outputs[-1].stderr
    listing = await run(server, home, project, "sessions", "list", "--all", key=key)
    outputs.append(listing)
    session_ids = sorted(p.parent.name for p in home.rglob("session.jsonl"))
    assert len(session_ids) == 4
    for session_id in session_ids:
        assert session_id[:8] in listing.stdout
        for command in ("show", "export"):
            shown = await run(server, home, project, "sessions", command, session_id, key=key)
            assert shown.code == 0, shown.stderr
            outputs.append(shown)

    spilled = [p for p in home.rglob("*") if "spill" in p.parts and p.is_file()]
    assert spilled, "nothing spilled: the test did not reach the spill files"
    assert leaks(home, allowed=allowed) == []
    assert leaks(project) == []
    for number, output in enumerate(outputs):
        assert CANARY not in output.stdout + output.stderr, f"output {number} holds the key"


async def test_everything_dsh_keeps_is_private_even_with_umask_000(
    server: FakeLLM, home_dirs: tuple[Path, Path]
) -> None:
    home, project = home_dirs
    old = os.umask(0)
    try:
        CredentialStore(home, project).set("OTHER_API_KEY", "sk-other")
    finally:
        os.umask(old)
    server.add(bash("head -c 200000 /dev/zero | tr '\\0' k"), Reply(text="Spilled."))
    done = await run(
        server, home, project, "-p", "spill", "--permission-mode", "bypass", key=CANARY,
        umask_0=True,
    )  # fmt: skip
    assert done.code == 0, done.stderr

    kinds = set()
    wrong = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_dir():
            kinds.add("dir")
            if mode != 0o700:
                wrong.append(f"{path}: {oct(mode)}")
        else:
            kinds.add(path.suffix or path.name)
            # git keeps its objects read-only: the checkpoints' copies of the files
            # are the user's to read alone, and nobody's to write.
            objects = {"checkpoints", "objects"} <= set(path.relative_to(home).parts)
            if mode != (0o400 if objects else 0o600):
                wrong.append(f"{path}: {oct(mode)}")
    assert wrong == []
    # What was checked: the log, the catalog, spill files, credentials and their lock.
    assert {".jsonl", ".sqlite", ".txt", ".json", ".lock"} <= kinds, kinds
