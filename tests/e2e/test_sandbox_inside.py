"""What must keep working inside the default sandbox (issue 37, Build 5).

Each test runs the real ``dsh -p`` against the scripted server under the default
policy (``workspace-write``), in ``bypass`` mode so that no rule stands between the
command and the sandbox, and checks the result both in what the model was told and on
disk: ``/dev/null``; git reading and committing in the project; ``python -m pytest``;
``npm test``; a dev server started as a background job and talked to from a later
call; writes in the project and in the sandbox's own ``/tmp``, which the next call
still sees. (A PTY's ``/dev/tty``, language servers and MCP servers inside are tested
with their plugins.)
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh
from tests.e2e.sandboxed import installation_outside_tmp

IDENTITY = {
    "GIT_AUTHOR_NAME": "Sandbox Test",
    "GIT_AUTHOR_EMAIL": "sandbox@example.invalid",
    "GIT_COMMITTER_NAME": "Sandbox Test",
    "GIT_COMMITTER_EMAIL": "sandbox@example.invalid",
}


@pytest.fixture
async def dsh(fake_llm: FakeLLM) -> AsyncIterator[Dsh]:
    """An installation outside ``/tmp`` (tests/e2e/sandboxed.py), whose commits are
    made by a git identity from the environment."""
    async with installation_outside_tmp(fake_llm) as installation:
        installation.environment.update(IDENTITY)
        yield installation


def bash(command: str, **more: Any) -> Reply:
    arguments = {"command": command, "description": "run", **more}
    return Reply(tool_calls=[ToolCallSpec(name="bash", arguments=arguments)])


def tool_texts(server: FakeLLM) -> list[str]:
    body = server.chat_requests[-1].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def run(dsh: Dsh, fake_llm: FakeLLM, *replies: Reply) -> list[str]:
    """Run the replies' calls through ``dsh -p`` in bypass mode; what the model was
    told of each."""
    fake_llm.add(*replies, Reply(text="Done."))
    done = await dsh.run("-p", "work", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr
    return tool_texts(fake_llm)


def succeeded(text: str) -> bool:
    return "[exit code" not in text and "[killed by signal" not in text


async def test_dev_null_is_writable(dsh: Dsh, fake_llm: FakeLLM) -> None:
    [text] = await run(
        dsh, fake_llm, bash("echo gone > /dev/null && cat /dev/null && echo null-ok 2>/dev/null")
    )

    assert text.strip() == "null-ok", text


async def test_git_reads_and_commits_in_the_project(dsh: Dsh, fake_llm: FakeLLM) -> None:
    texts = await run(
        dsh,
        fake_llm,
        bash("git init -q && echo one > a.txt && git add a.txt && git commit -qm first"),
        # The repository exists now: its hooks and config are read-only from here on.
        bash("echo two >> a.txt && git commit -qam second && git status --short"),
        bash("git log --format=%s"),
    )

    assert all(succeeded(text) for text in texts), texts
    assert texts[2].split() == ["second", "first"], texts[2]
    git = await asyncio.create_subprocess_exec(
        "git", "log", "--format=%an %s", cwd=dsh.project, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(git.communicate(), TIMEOUT)
    assert out.decode().splitlines() == ["Sandbox Test second", "Sandbox Test first"]


async def test_python_runs_pytest_in_the_project(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.project / "test_tiny.py").write_text("def test_adds():\n    assert 1 + 1 == 2\n")

    [text] = await run(dsh, fake_llm, bash(f"{sys.executable} -m pytest -q test_tiny.py"))

    assert succeeded(text), text
    assert "1 passed" in text, text
    assert (dsh.project / ".pytest_cache").is_dir()  # pytest wrote its cache: writable


async def test_npm_test_runs_node(dsh: Dsh, fake_llm: FakeLLM) -> None:
    package = {"name": "tiny", "version": "1.0.0", "scripts": {"test": "node check.js"}}
    (dsh.project / "package.json").write_text(json.dumps(package))
    (dsh.project / "check.js").write_text(
        "require('fs').writeFileSync('ran.txt', 'node ran');\nconsole.log('tiny test ok');\n"
    )

    [text] = await run(dsh, fake_llm, bash("npm test"))

    assert succeeded(text), text
    assert "tiny test ok" in text, text
    assert (dsh.project / "ran.txt").read_text() == "node ran"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


POLL = """\
    import sys, time, urllib.request
    # A hang guard, not a timing: the server is up in well under a second when sound.
    for _ in range(600):
        try:
            print(urllib.request.urlopen("http://127.0.0.1:{port}/hello.txt", timeout=5).read())
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("no server")
"""


async def test_a_dev_server_in_a_background_job_is_reached_by_a_later_call(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    port = free_port()
    (dsh.project / "hello.txt").write_text("hello from the job\n")
    (dsh.project / "poll.py").write_text(textwrap.dedent(POLL.format(port=port)))

    texts = await run(
        dsh,
        fake_llm,
        bash(f"python3 -m http.server --bind 127.0.0.1 {port}", run_in_background=True),
        bash("python3 poll.py"),  # another call, another sandbox: the job outlived its own
        Reply(tool_calls=[ToolCallSpec(name="job_list", arguments={})]),
    )

    assert "hello from the job" in texts[1], texts
    assert "running" in texts[2].lower(), texts[2]


async def test_writes_in_the_project_and_tmp_carry_to_the_next_call(
    dsh: Dsh, fake_llm: FakeLLM, scratch: str
) -> None:
    texts = await run(
        dsh,
        fake_llm,
        bash(f"echo kept > notes.txt && echo handed-over > {scratch}"),
        bash(f"cat {scratch} notes.txt"),
    )

    assert all(succeeded(text) for text in texts), texts
    assert texts[1].split() == ["handed-over", "kept"], texts[1]
    assert (dsh.project / "notes.txt").read_text() == "kept\n"
    # The calls share the sandbox's temporary folder, which is not the machine's /tmp.
    assert not os.path.exists(scratch)


@pytest.mark.parametrize("policy", ["workspace-write", "read-only"])
async def test_a_project_under_tmp_is_seen_in_every_policy(
    tmp_path: Path, fake_llm: FakeLLM, policy: str
) -> None:
    """A project in the machine's ``/tmp`` (pytest's ``tmp_path``) is not hidden by
    the sandbox's private ``/tmp``: it is bound over it, read-only when nothing may be
    written."""
    dsh = Dsh(tmp_path, fake_llm)
    dsh.home_of_its_own()
    (dsh.project / "readme.txt").write_text("in the project\n")
    fake_llm.add(bash("cat readme.txt && pwd"), Reply(text="Done."))
    try:
        done = await dsh.run("-p", "read", "--sandbox", policy, "--permission-mode", "bypass")
    finally:
        await dsh.kill_leftovers()

    assert done.code == 0, done.stderr
    [text] = tool_texts(fake_llm)
    assert text.split() == ["in", "the", "project", str(dsh.project)], text
