"""The session index under faults, through the real ``dsh -p`` and ``dsh sessions``.

- A damaged or stale index never keeps a session from opening: ``--continue`` and
  ``--resume`` repair or bypass it, saying so in one line; a batch the index missed
  is made good by the next.
- On a read-only or full ``$DSH_HOME``, the commands that only read work (the index
  kept in memory), and ``--continue`` says why it cannot go on, never a traceback.

A read-only or full disk is a small tmpfs the test mounts when it runs as root, else
a home the test makes read-only (``chmod``); a file size limit (``RLIMIT_FSIZE``) on
the child fails writes as a full disk does, without privileges.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, Finished, finish
from tests.reliability.test_storage_faults import (
    continued,
    lines_about,
    log_of,
    two_sessions,
    until_exists,
    use_backend,
    wait_for,
)
from tests.support.waits import HANG_S

ROOT = os.geteuid() == 0


def damage_index(home: Path) -> None:
    for suffix in ("-wal", "-shm"):
        (home / f"index.sqlite{suffix}").unlink(missing_ok=True)
    (home / "index.sqlite").write_bytes(b"what a bad sector left behind\n" * 300)


# ---------------------------------------------------------------------- the index


async def test_a_damaged_index_never_keeps_a_session_from_opening(dsh: Dsh) -> None:
    older, newer = await two_sessions(dsh)

    damage_index(dsh.home)
    done, opened = await continued(dsh, "--continue")
    assert done.code == 0, done.stderr
    assert opened == newer
    [said] = lines_about(done.stderr, "session index")
    assert "damaged" in said, said
    assert "rebuil" in said, said

    damage_index(dsh.home)
    done, opened = await continued(dsh, "--resume", older)
    assert done.code == 0, done.stderr
    assert opened == older
    assert len(lines_about(done.stderr, "session index")) == 1, done.stderr
    assert "Traceback" not in done.stderr

    listed = await dsh.run("sessions", "list")
    assert listed.code == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 2
    assert lines_about(listed.stderr, "session index") == []


async def test_a_batch_the_index_missed_is_made_good_by_the_next(dsh: Dsh) -> None:
    # The index is locked (another dsh's long write, say) past SQLite's busy timeout
    # while a batch is indexed: that batch fails. The next one finds the gap in the
    # index and has the whole log indexed, so the entry is what a rebuild gives.
    waits = [
        ToolCallSpec(name="bash", arguments={"command": wait_for(go), "description": "wait"})
        for go in ("go1", "go2")
    ]
    dsh.server.add(Reply(tool_calls=[waits[0]]), Reply(tool_calls=[waits[1]]), Reply(text="Ok."))
    child = await dsh.start(
        "-p", "wait twice", "--permission-mode", "bypass", stdin=subprocess.DEVNULL
    )
    await until_exists(dsh.project / "go1.started", child)
    index = sqlite3.connect(dsh.home / "index.sqlite", isolation_level=None)
    try:
        index.execute("BEGIN EXCLUSIVE")
        (dsh.project / "go1").touch()
        assert child.stderr is not None
        async with asyncio.timeout(HANG_S):
            while b"indexing failed" not in await child.stderr.readline():
                pass
    finally:
        index.rollback()
        index.close()
    (dsh.project / "go2").touch()
    done = await finish(child, None)
    assert done.code == 0, done.stderr

    listed = await dsh.run("sessions", "list", "--json")
    [entry] = json.loads(listed.stdout)
    assert entry["lastSeq"] == len(await dsh.events()) - 1
    assert "last_seq" not in entry  # camelCase, as every JSON dsh prints
    assert (await dsh.run("sessions", "reindex")).code == 0
    [rebuilt] = json.loads((await dsh.run("sessions", "list", "--json")).stdout)
    # (Costs aside: `dsh sessions` prices nothing, so a rebuilt entry has none.)
    assert {**entry, "cost": None} == rebuilt


@pytest.mark.parametrize("how", ["deleted", "emptied"])
async def test_continue_skips_a_session_whose_log_is_gone(dsh: Dsh, how: str) -> None:
    older, newer = await two_sessions(dsh)
    log = log_of(dsh, newer)
    if how == "deleted":
        shutil.rmtree(log.parent)
    else:
        log.write_bytes(b"")

    done, opened = await continued(dsh, "--continue")
    assert done.code == 0, done.stderr
    assert opened == older
    [said] = lines_about(done.stderr, newer[:8])
    assert "dropped from the index" in said, said
    done, opened = await continued(dsh, "--continue")
    assert opened == older
    assert lines_about(done.stderr, newer[:8]) == []


# ---------------------------------------------------------------------- read-only, full


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path | None]:
    """A 4 MiB tmpfs for ``$DSH_HOME`` when the test runs as root (else None): the
    test fills it or makes it read-only; unmounted at the end."""
    home = tmp_path / "home"
    home.mkdir()
    if not ROOT or shutil.which("mount") is None:
        yield None
        return
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(home)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True, timeout=30)


LIMIT = """\
import os, resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
os.execv(sys.argv[1], sys.argv[1:])
"""


@pytest.fixture(params=["jsonl", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture(params=["read-only", "full", "size-limited"])
async def faulty_home(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    mounted: Path | None,
    fake_llm: FakeLLM,
    backend: str,
) -> AsyncIterator[tuple[Dsh, list[str], tuple[str, str]]]:
    """Two sessions in a home that then cannot be written (read-only, full, or past
    the child's file size limit), its index gone (so reading needs one made in
    memory); and the prefix that puts a child under that limit."""
    if request.param == "full" and mounted is None:
        pytest.skip("filling a tmpfs needs root; size-limited fails writes the same way")
    dsh = Dsh(tmp_path, fake_llm)
    use_backend(dsh, backend)
    try:
        sessions = await two_sessions(dsh, backend)
        for suffix in ("", "-wal", "-shm"):
            (dsh.home / f"index.sqlite{suffix}").unlink(missing_ok=True)
        prefix = [sys.executable, "-c", LIMIT] if request.param == "size-limited" else []
        await asyncio.to_thread(make_unwritable, request.param, dsh.home, mounted)
        yield dsh, prefix, sessions
    finally:
        await dsh.kill_leftovers()
        if mounted is None:  # so that the test's folder can be removed
            await asyncio.to_thread(
                subprocess.run, ["chmod", "-R", "u+w", str(dsh.home)], capture_output=True
            )


def make_unwritable(how: str, home: Path, mounted: Path | None) -> None:
    """Make ``home`` read-only, or fill its disk (size-limited: the child's limit does)."""
    if how == "read-only":
        if mounted is not None:
            subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True, timeout=30)
        else:
            subprocess.run(["chmod", "-R", "a-w", str(home)], check=True, timeout=30)
    elif how == "full":
        assert mounted is not None
        try:
            with open(mounted / "filler", "wb") as handle:
                while True:
                    handle.write(b"\0" * 4096)
                    handle.flush()
        except OSError:
            pass  # the disk is full


async def run_in(dsh: Dsh, prefix: list[str], *args: str) -> Finished:
    child = await dsh.start(*args, stdin=asyncio.subprocess.DEVNULL, wrapper=prefix)
    return await finish(child, None)


async def test_reading_works_on_a_home_that_cannot_be_written(
    faulty_home: tuple[Dsh, list[str], tuple[str, str]],
) -> None:
    dsh, prefix, (older, newer) = faulty_home

    listed = await run_in(dsh, prefix, "sessions", "list")
    assert listed.code == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 2
    assert "the second question" in listed.stdout.splitlines()[0]
    [said] = lines_about(listed.stderr, "session index")
    assert "in memory" in said, said

    for args, expected in [
        (("sessions", "show", older[:8]), "The first answer."),
        (("sessions", "export", newer[:8]), "The second answer."),
        (("sessions", "search", "second"), newer[:8]),
        (("sessions", "list", "--all", "--json"), older),
    ]:
        done = await run_in(dsh, prefix, *args)
        assert done.code == 0, (args, done.stderr)
        assert expected in done.stdout, (args, done.stdout)
        assert "Traceback" not in done.stderr, done.stderr

    # Continuing needs writing: it finds the session, and where the disk is read-only
    # says it cannot go on (a full one may let it go as far as its first write).
    done = await run_in(dsh, prefix, "-p", "/cost", "--continue")
    assert "Traceback" not in done.stderr, done.stderr
    if done.code != 0:
        # The sandbox cannot start under the size cap either (its temp folder): said too.
        [said] = [
            line
            for line in done.stderr.splitlines()
            if line.startswith("dsh: ") and not line.startswith("dsh: the sandbox cannot start")
        ]
        assert newer[:8] in said, said
        assert "cannot be written" in said, said
