"""Stored session logs under faults, through the real ``dsh -p``.

- A log whose header is damaged is still found and continued.
- A forged seq costs memory in proportion to the log, not to the number it names.
- A log (JSONL) or database (SQLite) deleted, truncated or replaced while dsh writes
  it is reported for what happened at the next write, and the turn stops there.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.session import SessionStore
from dsh.testing import Reply, ToolCallSpec
from tests.e2e.harness import Dsh, Finished, finish
from tests.support.waits import HANG_S


async def two_sessions(dsh: Dsh, backend: str = "jsonl") -> tuple[str, str]:
    """Two sessions of the project, older first."""
    dsh.server.add(Reply(text="The first answer."), Reply(text="The second answer."))
    for prompt in ("the first question", "the second question"):
        done = await dsh.run("-p", prompt)
        assert done.code == 0, done.stderr
    store = SessionStore.at(dsh.home, backend)  # type: ignore[arg-type]
    try:
        headers = await store.persistence.list()
    finally:
        await store.aclose()
    older, newer = sorted(headers, key=lambda h: h.created_at)
    return older.id, newer.id


async def continued(dsh: Dsh, *how: str) -> tuple[Finished, str | None]:
    """``dsh -p /cost`` on the session ``how`` opens (no model call), and its id."""
    done = await dsh.run("-p", "/cost", *how, "--output-format", "json")
    lines = done.stdout.splitlines()
    result = json.loads(lines[-1]) if lines else {}
    return done, result.get("sessionId")


def lines_about(stderr: str, *words: str) -> list[str]:
    return [line for line in stderr.splitlines() if all(w in line for w in words)]


def use_backend(dsh: Dsh, backend: str) -> None:
    """Store ``dsh``'s sessions with ``backend``."""
    settings = dsh.home / "settings.toml"
    settings.write_text(f'[storage]\nbackend = "{backend}"\n' + settings.read_text())


def log_of(dsh: Dsh, session_id: str) -> Path:
    [path] = dsh.home.glob(f"sessions/*/{session_id}/session.jsonl")
    return path


# ---------------------------------------------------------------------- a damaged header


async def test_a_log_with_a_damaged_header_is_continued(dsh: Dsh) -> None:
    _older, newer = await two_sessions(dsh)
    log = log_of(dsh, newer)
    data = log.read_bytes()
    log.write_bytes(b"\xff" + data[1:])  # one bad byte: the header no longer parses
    for suffix in ("", "-wal", "-shm"):
        (dsh.home / f"index.sqlite{suffix}").unlink(missing_ok=True)

    done, opened = await continued(dsh, "--continue")
    assert done.code == 0, done.stderr
    assert opened == newer
    assert lines_about(done.stderr, "damaged session header"), done.stderr


# ---------------------------------------------------------------------- a forged seq


PEAK = """\
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:])
print("peak-kib", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(done.returncode)
"""


async def peak_of(dsh: Dsh, *args: str) -> tuple[Finished, int]:
    """Run ``dsh ARGS`` and measure its peak resident memory, in KiB."""
    wrapper = (sys.executable, "-c", PEAK)
    child = await dsh.start(*args, stdin=asyncio.subprocess.DEVNULL, wrapper=wrapper)
    done = await finish(child, None)
    [peak] = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("peak")]
    return done, peak


async def test_a_forged_seq_costs_what_the_log_holds(dsh: Dsh) -> None:
    _older, newer = await two_sessions(dsh)
    clean, clean_peak = await peak_of(dsh, "-p", "/cost", "--continue")
    assert clean.code == 0, clean.stderr
    exported = await dsh.run("sessions", "export", newer)
    records = len(exported.stdout.splitlines())

    log = log_of(dsh, newer)
    forged = {"type": "x/forged", "seq": 1_000_000, "time": 1, "data": {}}
    log.write_bytes(log.read_bytes() + json.dumps(forged).encode() + b"\n")
    done, peak = await peak_of(dsh, "-p", "/cost", "--continue")
    assert done.code == 0, done.stderr
    # Not a million placeholders: the forged record costs itself (about 60 bytes).
    assert peak < clean_peak + 64 * 1024, (peak, clean_peak)
    again = await dsh.run("sessions", "export", newer)
    assert len(again.stdout.splitlines()) <= records + 2
    assert lines_about(done.stderr, "seq 1000000"), done.stderr


# ---------------------------------------------------------------------- lost while written


def wait_for(name: str) -> str:
    """A command that says it started, then waits for the test to make file ``name``."""
    return f"touch {name}.started; while [ ! -e {name} ]; do sleep 0.05; done; echo went"


async def until_exists(path: Path, child: asyncio.subprocess.Process) -> None:
    async with asyncio.timeout(HANG_S):
        while not path.exists():
            if child.returncode is not None:
                raise AssertionError(f"dsh ended before {path.name} was made")
            await asyncio.sleep(0.05)


async def run_until_the_tool_waits(dsh: Dsh, *args: str) -> asyncio.subprocess.Process:
    """Start a run whose one tool call waits for the test; return once it waits (its
    call is in the log by then: a command with effects is stored before it runs)."""
    bash = ToolCallSpec(name="bash", arguments={"command": wait_for("go"), "description": "wait"})
    # The second call has effects: it runs only once the log holds it, so its turn
    # ends at the write that finds the log lost.
    after = ToolCallSpec(name="bash", arguments={"command": "touch after", "description": "mark"})
    dsh.server.add(Reply(tool_calls=[bash]), Reply(tool_calls=[after]), Reply(text="Done."))
    child = await dsh.start(
        "-p", "wait for the go", "--permission-mode", "bypass", *args, stdin=subprocess.DEVNULL
    )
    await until_exists(dsh.project / "go.started", child)
    return child


def delete(path: Path) -> None:
    path.unlink()


def truncate(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def replace(path: Path) -> None:
    """The same bytes in another file (a sync tool, an editor's save)."""
    copy = path.with_name(path.name + ".copy")
    shutil.copyfile(path, copy)
    os.replace(copy, path)


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
@pytest.mark.parametrize(
    ("fault", "what"),
    [(delete, "deleted"), (truncate, "truncated"), (replace, "replaced by another file")],
)
async def test_a_log_lost_while_written_is_reported_for_what_happened(
    dsh: Dsh, backend: str, fault: object, what: str
) -> None:
    use_backend(dsh, backend)
    child = await run_until_the_tool_waits(dsh)
    if backend == "jsonl":
        [log] = dsh.home.glob("sessions/*/*/session.jsonl")
    else:
        log = dsh.home / "sessions.sqlite"
    fault(log)  # type: ignore[operator]
    (dsh.project / "go").touch()
    done = await finish(child, None)

    assert "Traceback" not in done.stderr, done.stderr
    assert "another process wrote to it" not in done.stderr
    [said] = [line for line in done.stderr.splitlines() if line.startswith("dsh: ")]
    assert f"was {what} while dsh was writing it" in said, said
    assert "so dsh stopped" in said, said
    assert not (dsh.project / "after").exists(), "a call ran that the log could not hold"
