"""No process dsh started outlives it: killed with SIGKILL, dsh takes down its bash
commands (and what they started), its background jobs, its terminals and its
language server; and if its watchdog died with it, the next dsh to start ends the
leftovers.

Each test looks for ``sleep`` lengths of its own: tests running beside it (pytest-xdist
workers) start processes of the same shape."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from pathlib import Path

import pytest

from dsh.testing import Reply, ToolCallSpec
from tests.e2e.harness import Dsh
from tests.support.waits import HANG_S

MARKERS: tuple[str, ...] = ()
"""Unusual ``sleep`` lengths, to find the processes the running test's dsh started:
the job, the terminal, the command's background child and the command itself."""
PROJECTS: list[Path] = []
"""The project of the running test: its language server works there."""


@pytest.fixture(autouse=True)
def markers() -> None:
    global MARKERS
    token = random.randrange(10**6)
    MARKERS = tuple(f"417{n}.{token:06d}" for n in range(1, 5))


def running() -> dict[int, str]:
    """The live (not zombie) ``sleep N`` processes of the markers, and the language
    server working in the test's project (as ``"pylsp"``), by pid."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry.name}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if state in (b"Z", b"X") or len(cmdline) < 2:
            continue
        if cmdline[0] == b"sleep" and cmdline[1].decode() in MARKERS:
            found[int(entry.name)] = cmdline[1].decode()
        elif any(part.endswith(b"pylsp") for part in cmdline[:2]):
            with contextlib.suppress(OSError):
                if Path(os.readlink(f"/proc/{entry.name}/cwd")) in PROJECTS:
                    found[int(entry.name)] = "pylsp"
    return found


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(f"/proc/{entry.name}/stat").read_bytes().rpartition(b")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


async def wait_until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``condition()`` holds; the bound only guards against a hang."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {running()} after {HANG_S} s")
        await asyncio.sleep(0.05)


def busy_turn(dsh: Dsh) -> None:
    """A background job, a terminal, and a command that starts a child of its own
    and then waits: all still running when dsh is killed."""
    job, terminal, child, command = MARKERS
    (dsh.project / "app.py").write_text("def main():\n    return 1\n")
    PROJECTS[:] = [dsh.project.resolve()]
    dsh.server.add(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="lsp", arguments={"operation": "document_symbols", "file_path": "app.py"}
                ),
                ToolCallSpec(
                    name="bash",
                    arguments={
                        "command": f"sleep {job}",
                        "description": "A job",
                        "run_in_background": True,
                    },
                ),
                ToolCallSpec(name="terminal_open", arguments={"command": f"sleep {terminal}"}),
                ToolCallSpec(
                    name="bash",
                    arguments={
                        "command": f"sleep {child} & sleep {command}; echo done",
                        "description": "Wait",
                    },
                ),
            ]
        )
    )
    dsh.server.add(Reply(text="never reached"))


async def started_all(dsh: Dsh, *flags: str) -> asyncio.subprocess.Process:
    busy_turn(dsh)
    child = await dsh.start("-p", "keep busy", "--permission-mode", "bypass", *flags)
    everything = {*MARKERS, "pylsp"}
    await wait_until(lambda: set(running().values()) == everything, "not all started")
    return child


async def kill_with_its_watchdog(child: asyncio.subprocess.Process) -> None:
    """SIGKILL to dsh and to the watchdog that would end its children."""
    watchdogs = [
        pid
        for pid in children_of(child.pid)
        if b"-S\0-I\0-c" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(watchdogs) == 1
    os.kill(watchdogs[0], signal.SIGKILL)
    child.send_signal(signal.SIGKILL)
    await child.wait()


async def test_a_killed_dsh_takes_every_child_with_it(dsh: Dsh) -> None:
    assert running() == {}, "leftovers of an earlier run"
    child = await started_all(dsh)
    child.send_signal(signal.SIGKILL)
    await child.wait()
    await wait_until(lambda: not running(), "children outlived dsh")


async def test_leftovers_of_a_dsh_whose_watchdog_died_too_end_at_the_next_start(
    dsh: Dsh,
) -> None:
    assert running() == {}, "leftovers of an earlier run"
    # Unsandboxed: inside the sandbox, the command's PID namespace ends with its shell,
    # grandchildren and all (the next test), and nothing would be left to sweep.
    child = await started_all(dsh, "--sandbox", "off")
    await kill_with_its_watchdog(child)
    # The parent-death signal ended what dsh started itself (a shell that ran one
    # program became that program); the grandchildren of the command's shell
    # survive, as nothing else knew of them.
    grandchildren = set(MARKERS[2:])
    await wait_until(lambda: set(running().values()) <= grandchildren, "children")
    assert set(running().values()) == grandchildren
    # The next dsh to start ends it (this one has nothing to ask the model).
    done = await dsh.run("sessions", "list")  # not a runtime: no sweep
    assert done.code == 0
    assert set(running().values()) == grandchildren
    await dsh.run("-p", "/cost")
    await wait_until(lambda: not running(), "leftovers after the next start")


async def test_inside_the_sandbox_nothing_outlives_a_dsh_whose_watchdog_died_too(
    dsh: Dsh,
) -> None:
    assert running() == {}, "leftovers of an earlier run"
    child = await started_all(dsh)
    await kill_with_its_watchdog(child)
    # bwrap dies with dsh, and the command's PID namespace with it: the grandchildren
    # its shell started too, which the unsandboxed run above leaves to the next start.
    await wait_until(lambda: not running(), "children outlived dsh")
