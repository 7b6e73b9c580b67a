"""A full disk while ``dsh -p`` writes its session log.

The data directory is a small tmpfs the test mounts (root only; skipped with the
reason otherwise), or, everywhere, the log is capped by ``RLIMIT_FSIZE`` so writes
past a size fail the way a full disk fails them. Either way, mid-conversation:

- the user gets one clear ``dsh:`` line naming the problem, exit status 1, and no
  traceback;
- no command with effects runs unless its call is in the log first (every marker
  file a ``touch`` made has its ``tool/call`` stored);
- the log stays loadable and sound after crash repair;
- once there is room again, the session resumes to a correct end, and the resumed
  run's requests are rebuildable from the log.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh.llm import SessionId
from dsh.session import SessionEvent, TurnStart, check_log
from dsh.session.jsonl import JsonlPersistence
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh, Finished, finish
from tests.reliability.logs import new_session
from tests.reliability.runs import kept, rebuilt_bodies, stored
from tests.session.turns import complete_turn

SETTINGS = '[plugins]\nmodules = ["tests.support.echo_tool"]\n'
PADDING = "x" * 20_000


def conversation() -> list[Reply]:
    """Steps that each add ~80 KB to the log, with a command with effects between them."""
    replies = []
    for i in range(8):
        replies.append(Reply(tool_calls=[echo(f"{i} {PADDING}")], chunk_size=4000))
        bash = ToolCallSpec(
            name="bash", arguments={"command": f"touch mark-{i}", "description": "mark"}
        )
        replies.append(Reply(tool_calls=[bash]))
    replies.append(Reply(text="Finished."))
    return replies


def echo(text: str) -> ToolCallSpec:
    return ToolCallSpec(name="echo", arguments={"text": text})


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    """A 448 KiB tmpfs for ``$DSH_HOME``; it grows to 64 MiB when the test calls the
    path's ``resize`` attribute (a file beside it), unmounted at the end. (256 KiB,
    with the session index beside the log, was sometimes full before the first command
    ran on a loaded machine: the index writes as the run goes, at its own pace.)"""
    home = tmp_path / "root" / "home"
    home.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root; test_a_size_limited_log covers it")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=448k,mode=0700", "tmpfs", str(home)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True, timeout=30)


def fill(path: Path) -> None:
    """Write ``path`` until the filesystem holding it has no room left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block = b"\0" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError:
                return
    finally:
        os.close(fd)


def grow(home: Path) -> None:
    subprocess.run(
        ["mount", "-o", "remount,size=64m", str(home)], check=True, capture_output=True, timeout=30
    )


async def run_until_full(dsh: Dsh, fake_llm: FakeLLM, *prefix: str) -> Finished:
    fake_llm.add(*conversation())
    child = await dsh.start(
        "-p",
        "echo and mark, eight times",
        "--permission-mode",
        "bypass",
        stdin=asyncio.subprocess.DEVNULL,
        wrapper=prefix,
    )
    return await finish(child, None)


async def check_stopped_cleanly(dsh: Dsh, done: Finished, reason: str) -> list[SessionEvent]:
    """The run stopped with a clear line, and what it left is sound and complete
    enough: every effect it had is in the log."""
    assert done.code == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("dsh: ")]
    assert said == [
        f"dsh: the session log cannot be written ({reason}), so dsh stopped; what it holds "
        f"so far is safe: free the space and resume the session {(await dsh.session_ids())[0]}"
    ], done.stderr
    [session_id] = await dsh.session_ids()
    loaded = await stored(dsh.home, session_id)
    assert {i.kind for i in loaded.issues} <= {"torn-tail", "interrupted-turn"}, loaded.issues
    assert check_log(loaded.events) == []
    events = kept(loaded)
    assert len(events) > 10, "the disk filled before the conversation got going"
    marks = sorted(p.name for p in dsh.project.glob("mark-*"))
    logged = [e.data.arguments for e in events if e.type == "tool/call" and e.data.name == "bash"]
    assert marks, "no command ran before the disk filled: the test proves nothing"
    for mark in marks:
        assert any(mark in arguments for arguments in logged), f"{mark} ran unrecorded"
    assert len(marks) < 8, "the run went on as if nothing had happened"
    return loaded.events


async def check_resumes(dsh: Dsh, before: list[SessionEvent]) -> None:
    [session_id] = await dsh.session_ids()
    async with FakeLLM([Reply(tool_calls=[echo("again")]), Reply(text="Resumed.")]) as server:
        dsh.server = server
        again = await dsh.run("-p", "go on", "--resume", session_id)
        bodies = [r.body for r in server.chat_requests]
    assert again.code == 0, again.stderr
    assert again.stdout == "Resumed.\n"
    loaded = await stored(dsh.home, session_id)
    assert loaded.issues == [], loaded.issues
    assert check_log(loaded.events) == []
    # Everything the full disk let through is still there, closed by repair.
    assert [e.to_dict() for e in loaded.events[: len(before)]] == [e.to_dict() for e in before]
    resumed = [body for seq, body in rebuilt_bodies(loaded.events) if seq >= len(before)]
    assert resumed == bodies
    assert [e.data.turn for e in loaded.events if isinstance(e.data, TurnStart)] == [1, 2]


async def test_a_full_disk_stops_the_run_with_a_clear_error_and_the_log_loads(
    small_home: Path, fake_llm: FakeLLM
) -> None:
    dsh = Dsh(small_home.parent, fake_llm)
    (dsh.home / "settings.toml").write_text(SETTINGS)
    try:
        done = await run_until_full(dsh, fake_llm)
        before = await check_stopped_cleanly(dsh, done, "No space left on device")
        grow(small_home)
        await check_resumes(dsh, before)
    finally:
        await dsh.kill_leftovers()


LIMIT = """\
import os, resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (250_000, 250_000))
os.execv(sys.argv[1], sys.argv[1:])
"""


async def test_a_size_limited_log_stops_the_run_with_a_clear_error_and_the_log_loads(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # RLIMIT_FSIZE makes every write past 250 KB fail with EFBIG, as a full disk fails
    # them with ENOSPC; it needs no privileges.
    dsh = Dsh(tmp_path, fake_llm)
    (dsh.home / "settings.toml").write_text(SETTINGS)
    try:
        done = await run_until_full(dsh, fake_llm, sys.executable, "-c", LIMIT)
        before = await check_stopped_cleanly(dsh, done, "File too large")
        await check_resumes(dsh, before)
    finally:
        await dsh.kill_leftovers()


async def test_a_short_write_never_leaves_a_file_shorter_than_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first write of a session creates its file; a disk filling up can make that
    # write short. The rest must follow (or the append fail), never a file that holds
    # less than the backend believes, which the next append would pad with NULs.
    session = new_session()
    complete_turn(session, "hello", "hi there")
    real_write = os.write
    calls: list[int] = []

    def short_write(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data)[: max(1, len(data) // 2)])

    backend = JsonlPersistence(tmp_path)
    await backend.create(session.header)
    monkeypatch.setattr("dsh.session.jsonl.os.write", short_write)
    await backend.append(session.id, session.events[:5])
    monkeypatch.undo()
    await backend.append(session.id, session.events[5:])
    await backend.close()
    assert len(calls) > 1, "the test's short write was not exercised"

    fresh = JsonlPersistence(tmp_path)
    try:
        loaded = await asyncio.wait_for(fresh.load(SessionId(session.id)), TIMEOUT)
    finally:
        await fresh.close()
    assert loaded.issues == []
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in session.events]


async def test_a_new_session_on_a_full_disk_is_an_error_naming_no_session(
    small_home: Path, fake_llm: FakeLLM
) -> None:
    # The filesystem is full before dsh starts: not a byte of the session can be
    # written, and the run must not say otherwise.
    dsh = Dsh(small_home.parent, fake_llm)
    await asyncio.to_thread(fill, small_home / "filler")
    fake_llm.add(Reply(text="Hello there."))
    try:
        done = await dsh.run("-p", "hi", "--output-format", "json")
    finally:
        await dsh.kill_leftovers()
    nothing = (
        "the session log cannot be written (No space left on device), so dsh stopped; "
        "nothing of this session was stored"
    )
    assert done.code == 1, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("dsh: ")] == [
        f"dsh: {nothing}"
    ]
    [result] = done.json_lines()
    assert (result["subtype"], result["error"], result["sessionId"]) == ("error", nothing, None)
    assert await dsh.session_ids() == []
