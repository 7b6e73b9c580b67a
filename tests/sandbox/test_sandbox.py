"""The sandbox's core against the real bwrap: what a wrapped command can and cannot do,
asserted on the effects (files on disk, connections a server saw), not on messages."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from dsh.sandbox import Sandbox, SandboxUnavailable, Widening, launch_options
from dsh.settings import load_settings
from dsh.settings_tables import SandboxTable
from tests.support.sandboxing import Listener, listening
from tests.support.waits import HANG_S

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


class Folders:
    def __init__(self, base: Path) -> None:
        self.project = base / "project"
        self.home = base / "home"
        self.dsh_home = base / "dsh-home"
        self.outside = base / "outside"
        for folder in (self.project / ".git", self.home / ".ssh", self.dsh_home, self.outside):
            folder.mkdir(parents=True)
        (self.project / ".git" / "config").write_text("[core]\n")
        (self.home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-MARKER\n")
        (self.dsh_home / "credentials.json").write_text('{"k": "CREDENTIAL-MARKER"}')
        (self.home / ".bashrc").write_text("# bashrc\n")


@pytest.fixture
def folders(tmp_path: Path) -> Folders:
    return Folders(tmp_path)


def make(folders: Folders, policy: str = "workspace-write", **table: object) -> Sandbox:
    return Sandbox(
        SandboxTable.model_validate(table),
        policy,  # type: ignore[arg-type]
        root=folders.project,
        home=folders.dsh_home,
        user_home=folders.home,
    )


@pytest_asyncio.fixture
async def sandbox(folders: Folders) -> AsyncIterator[Sandbox]:
    contained = make(folders)
    status = await contained.ready()
    if not status.active:
        pytest.fail(f"the sandbox does not start on this machine: {status.reason}")
    yield contained
    await contained.aclose()


async def run(
    sandbox: Sandbox, script: str, cwd: Path, widening: Widening | None = None
) -> tuple[int, str]:
    wrapped = await sandbox.wrap(["bash", "-c", script], cwd=cwd, env=ENV, widening=widening)
    process = await asyncio.create_subprocess_exec(
        *wrapped.argv,
        cwd=cwd,
        env=wrapped.env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        **launch_options(wrapped),
    )
    out, _ = await asyncio.wait_for(process.communicate(), HANG_S)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


@pytest.fixture
def listener() -> Iterator[Listener]:
    with listening() as server:
        yield server


CONNECT = (
    'python3 -c "import socket,sys; s=socket.socket(); s.settimeout(5); '
    "print('connected' if s.connect_ex(('127.0.0.1', int(sys.argv[1]))) == 0 else 'refused')\" "
)


async def test_the_project_is_writable_and_the_rest_is_not(
    sandbox: Sandbox, folders: Folders
) -> None:
    _code, out = await run(
        sandbox,
        f"echo made > made.txt; echo x >> {folders.home}/.bashrc; echo x > {folders.outside}/f;"
        " echo x > .git/hooks/pre-commit; echo x >> .git/config; echo x > .dsh/settings.toml;"
        " echo ok > /dev/null && echo devnull-ok",
        folders.project,
    )
    assert (folders.project / "made.txt").read_text() == "made\n"
    assert (folders.home / ".bashrc").read_text() == "# bashrc\n"
    assert not (folders.outside / "f").exists()
    assert not (folders.project / ".git" / "hooks" / "pre-commit").exists()
    assert (folders.project / ".git" / "config").read_text() == "[core]\n"
    assert not (folders.project / ".dsh" / "settings.toml").exists()
    assert "devnull-ok" in out
    assert "Read-only file system" in out


async def test_secret_stores_dsh_home_and_other_processes_are_out_of_sight(
    sandbox: Sandbox, folders: Folders
) -> None:
    _code, out = await run(
        sandbox,
        f"cat {folders.home}/.ssh/id_rsa; cat {folders.dsh_home}/credentials.json;"
        f" ls /proc/{os.getpid()} >/dev/null 2>&1 && echo dsh-visible;"
        " cat /proc/$PPID/environ; echo done",
        folders.project,
    )
    assert "PRIVATE-KEY-MARKER" not in out
    assert "CREDENTIAL-MARKER" not in out
    assert "dsh-visible" not in out
    assert "done" in out


async def test_a_private_tmp_shared_by_the_session_s_commands(
    sandbox: Sandbox, folders: Folders, tmp_path: Path
) -> None:
    marker = f"dsh-sandbox-test-{os.getpid()}"
    await run(sandbox, f"echo kept > /tmp/{marker}", folders.project)
    _code, out = await run(sandbox, f"cat /tmp/{marker}", folders.project)
    assert out.strip() == "kept"
    assert not Path("/tmp", marker).exists()  # the host's /tmp is not the sandbox's


async def test_no_network_but_a_loopback_the_commands_share(
    sandbox: Sandbox, folders: Folders, listener: Listener
) -> None:
    _code, out = await run(sandbox, CONNECT + str(listener.port), folders.project)
    assert "refused" in out
    assert listener.accepted == 0
    # A server started by one command is reached by the next.
    server = await sandbox.wrap(
        ["python3", "-c", SERVE], cwd=folders.project, env=ENV, widening=None
    )
    process = await asyncio.create_subprocess_exec(
        *server.argv,
        cwd=folders.project,
        env=server.env,
        stdout=asyncio.subprocess.PIPE,
        **launch_options(server),
    )
    try:
        assert process.stdout is not None
        port = int((await asyncio.wait_for(process.stdout.readline(), HANG_S)).decode())
        _code, out = await run(sandbox, CONNECT + str(port), folders.project)
        assert "connected" in out
    finally:
        process.kill()
        await process.wait()


SERVE = (
    "import socket; s = socket.create_server(('127.0.0.1', 0)); "
    "print(s.getsockname()[1], flush=True)\n"
    "while True: s.accept()[0].close()"
)


async def test_a_widening_adds_the_network_or_a_folder_for_one_command(
    sandbox: Sandbox, folders: Folders, listener: Listener
) -> None:
    _code, out = await run(
        sandbox, CONNECT + str(listener.port), folders.project, Widening(network=True)
    )
    assert "connected" in out
    assert listener.reached(1) == 1
    await run(
        sandbox,
        f"echo widened > {folders.outside}/f",
        folders.project,
        Widening(writable=(folders.outside,)),
    )
    assert (folders.outside / "f").read_text() == "widened\n"
    await run(sandbox, f"echo again > {folders.outside}/g", folders.project)
    assert not (folders.outside / "g").exists()


async def test_read_only_leaves_only_tmp_writable(folders: Folders) -> None:
    contained = make(folders, "read-only")
    try:
        assert (await contained.ready()).active
        _code, out = await run(
            contained, "echo x > made.txt; echo y > /tmp/y && cat /tmp/y", folders.project
        )
    finally:
        await contained.aclose()
    assert not (folders.project / "made.txt").exists()
    assert out.splitlines()[-1] == "y"


async def test_off_runs_the_command_as_given(folders: Folders) -> None:
    contained = make(folders, "off")
    status = await contained.ready()
    assert (status.active, status.summary()) == (False, "sandbox off")
    assert status.warning() is not None
    wrapped = await contained.wrap(["true"], cwd=folders.project, env=ENV)
    assert wrapped.argv == ["true"]
    assert not wrapped.sandboxed


async def test_a_sandbox_that_cannot_start_says_why_and_runs_nothing(folders: Folders) -> None:
    contained = make(folders, program=str(folders.outside / "no-bwrap"))
    status = await contained.ready()
    assert status.unavailable
    assert status.summary() == "no sandbox"
    assert status.reason is not None
    assert "no-bwrap" in status.reason
    assert status.reason in (status.warning() or "")
    with pytest.raises(SandboxUnavailable):
        await contained.wrap(["true"], cwd=folders.project, env=ENV)
    # Unsandboxed only when a widening (an approval) says so.
    wrapped = await contained.wrap(
        ["true"], cwd=folders.project, env=ENV, widening=Widening(unsandboxed=True)
    )
    assert wrapped.argv == ["true"]


async def test_a_broken_bwrap_is_reported_in_its_own_words(folders: Folders) -> None:
    fake = folders.outside / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    status = await make(folders, program=str(fake)).ready()
    assert status.unavailable
    assert status.reason == "bwrap: No permissions to create new namespace"


def test_a_project_may_narrow_the_policy_but_never_widen_it(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".dsh").mkdir(parents=True)
    home.mkdir()
    settings_file = project / ".dsh" / "settings.toml"
    for trusted in (True, False):
        settings_file.write_text('[sandbox]\npolicy = "off"\n')
        settings = load_settings(home, project, environ={}, trust=trusted)
        assert settings.sandbox.policy == "workspace-write"
        settings_file.write_text('[sandbox]\npolicy = "read-only"\n')
        assert load_settings(home, project, environ={}, trust=trusted).sandbox.policy == "read-only"
    settings_file.write_text('[sandbox]\npolicy = "off"\n')
    untrusted = load_settings(home, project, environ={}, trust=False)
    assert [i.key for i in untrusted.ignored] == ["sandbox.policy"]
    (home / "settings.toml").write_text('[sandbox]\npolicy = "off"\n')
    assert load_settings(home, project, environ={}, trust=True).sandbox.policy == "off"


async def test_nothing_is_made_in_the_project_until_a_command_runs(folders: Folders) -> None:
    shutil.rmtree(folders.project / ".git")
    contained = make(folders)
    try:
        assert (await contained.ready()).active
        assert sorted(p.name for p in folders.project.iterdir()) == []
        await run(contained, "true", folders.project)
        # Made empty so that it can be bound read-only: a command cannot plant one.
        assert sorted(p.name for p in folders.project.iterdir()) == [".dsh"]
    finally:
        await contained.aclose()


async def test_a_repository_a_command_made_is_protected_from_the_next(folders: Folders) -> None:
    shutil.rmtree(folders.project / ".git")
    contained = make(folders)
    try:
        assert (await contained.ready()).active
        await run(contained, "git init -q . && mkdir -p .git/hooks", folders.project)
        await run(contained, "echo planted > .git/hooks/pre-commit", folders.project)
    finally:
        await contained.aclose()
    assert (folders.project / ".git" / "hooks").is_dir()
    assert not (folders.project / ".git" / "hooks" / "pre-commit").exists()


async def test_what_lies_under_the_hosts_tmp_is_seen_only_where_it_must_be(
    sandbox: Sandbox, folders: Folders, tmp_path: Path
) -> None:
    # A clone and its venv in /tmp (as CI's) still run: the installation is seen, and
    # a script a server's command line names.
    script = tmp_path / "server.py"
    script.write_text("print('served')\n")
    secret = tmp_path / "neighbour"
    secret.mkdir()
    (secret / "note").write_text("NEIGHBOUR-MARKER\n")
    wrapped = await sandbox.wrap(
        [sys.executable, str(script)], cwd=folders.project, env=ENV, shared_network=False
    )
    done = await asyncio.create_subprocess_exec(
        *wrapped.argv,
        cwd=folders.project,
        env=wrapped.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        **launch_options(wrapped),
    )
    out, _ = await asyncio.wait_for(done.communicate(), HANG_S)
    assert out.decode().strip() == "served"
    # A command line naming a folder of the host's /tmp shows nothing of it.
    _code, out_text = await run(sandbox, f"cat {secret}/note; ls {secret}", folders.project)
    assert "NEIGHBOUR-MARKER" not in out_text
    _code, out_text = await run(sandbox, str(secret), folders.project)
    assert "NEIGHBOUR-MARKER" not in out_text
