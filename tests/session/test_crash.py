"""Crash safety: a process writing a session is killed (SIGKILL) at random moments.

Each kill must leave a session that reloads with every event up to the last flush the
writer reported, identical to what it appended, with any open turn closed by repair
into a sound log; and the session must then take more turns and reload cleanly.

The writer is ``crash_writer.py``, run as a child process. Its events are a function
of its seed, so this side regenerates them to compare. Kill moments depend on timing
and are not reproducible, but the seed in a failure message reproduces the events:
``python tests/session/crash_writer.py HOME BACKEND SEED`` writes them again.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh.llm import SessionId, new_session_id
from dsh.session.catalog import Catalog
from dsh.session.events import SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.invariants import check_log
from dsh.session.persistence import LoadedSession, SessionNotFoundError
from dsh.session.session import Session
from dsh.session.store import Backend, SessionStore, make_persistence
from tests.session.crash_writer import CWD, WINDOW, Script
from tests.support.waits import HANG_S

WRITER = Path(__file__).with_name("crash_writer.py")
MASTER_SEED = 20240617
KILLS: dict[Backend, int] = {"jsonl": 50, "sqlite": 20}
CONCURRENT = 3
EARLY_KILLS = 0.15  # share of kills that do not wait for a first flush
STARTUP_TIMEOUT = HANG_S  # hang guards: a loaded machine can take seconds to start Python
FLUSH_TIMEOUT = HANG_S
REAP_TIMEOUT = HANG_S
ROUND_TIMEOUT = 4 * HANG_S


@dataclass(frozen=True)
class Plan:
    seed: int
    wait_for_flush: bool
    delay: float  # seconds from the first flush (or from SESSION) to the kill


@dataclass
class Report:
    """What the child said on stdout before it died."""

    session_id: SessionId | None = None
    last_flushed: int | None = None


def plans(backend: Backend) -> list[Plan]:
    rng = random.Random(f"{MASTER_SEED}-{backend}")
    out = []
    for _ in range(KILLS[backend]):
        seed = rng.getrandbits(32)
        if rng.random() < EARLY_KILLS:
            # Some land before the first write: the session must then be absent or whole.
            out.append(Plan(seed, wait_for_flush=False, delay=rng.uniform(0, 0.01)))
        else:
            out.append(Plan(seed, wait_for_flush=True, delay=rng.uniform(0, 0.3)))
    return out


def expected_events(seed: int, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events the writer with ``seed`` appends, as stored dicts
    without their time."""
    header = SessionHeader(id=new_session_id(), created_at=0, cwd=CWD)
    session = Session(header, clock=lambda: 0)
    for planned in Script(seed).events():
        if planned.seq >= count:
            break
        session.append(planned.type, planned.data, source_event_seqs=planned.sources)
    return [timeless(event) for event in session.events]


def timeless(event: SessionEvent) -> dict[str, Any]:
    return {k: v for k, v in event.to_dict().items() if k != "time"}


def dicts(events: Sequence[SessionEvent]) -> list[dict[str, Any]]:
    return [event.to_dict() for event in events]


# ---------------------------------------------------------------------- the child


async def read_reports(
    stdout: asyncio.StreamReader, report: Report, started: asyncio.Event, flushed: asyncio.Event
) -> None:
    """Follow the child's stdout to its end, setting ``started`` at its session id and
    ``flushed`` at its first flush.

    Reading must go on until the kill: a child blocked on a full pipe would stop
    writing, and the kill would always land in the same place."""
    while line := await stdout.readline():
        if not line.endswith(b"\n"):
            break  # cut off by the kill: it reports nothing
        word, _, value = line.decode().strip().partition(" ")
        if word == "SESSION":
            report.session_id = SessionId(value)
            started.set()
        elif word == "FLUSHED":
            report.last_flushed = int(value)
            flushed.set()


async def run_and_kill(plan: Plan, backend: Backend, home: Path) -> Report:
    home.mkdir(parents=True)
    report = Report()
    started, flushed = asyncio.Event(), asyncio.Event()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(home),
        backend,
        str(plan.seed),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "DSH_HOME": str(home)},
    )
    assert child.stdout is not None
    assert child.stderr is not None
    reader = asyncio.create_task(read_reports(child.stdout, report, started, flushed))
    errors = asyncio.create_task(child.stderr.read())
    killed = False
    try:
        async with asyncio.timeout(STARTUP_TIMEOUT):
            await until(started, reader)
        if plan.wait_for_flush:
            async with asyncio.timeout(FLUSH_TIMEOUT):
                await until(flushed, reader)
        await asyncio.sleep(plan.delay)
    finally:
        # Also when waiting failed: no child outlives its round.
        if child.returncode is None:
            killed = not reader.done()
            child.send_signal(signal.SIGKILL)
        async with asyncio.timeout(REAP_TIMEOUT):
            await child.wait()
            await reader
            stderr = (await errors).decode(errors="replace")[-3000:]
    assert killed, f"seed {plan.seed}: the writer stopped by itself:\n{stderr}"
    assert child.returncode == -signal.SIGKILL, f"seed {plan.seed}:\n{stderr}"
    return report


async def until(event: asyncio.Event, reader: asyncio.Task[None]) -> None:
    """Wait for ``event``, or for the child's stdout to end."""
    waiter = asyncio.create_task(event.wait())
    try:
        await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


# ---------------------------------------------------------------------- the checks


async def check_reload(
    plan: Plan, backend: Backend, home: Path, report: Report
) -> LoadedSession | None:
    """Load the killed session with a fresh backend: every event up to the last
    reported flush is there, everything stored is what was appended, and repair
    leaves a sound log. None when nothing was stored (and nothing was reported)."""
    where = f"seed {plan.seed} ({backend}, flushed through {report.last_flushed})"
    assert report.session_id is not None
    persistence = make_persistence(backend, home)
    try:
        loaded = await persistence.load(report.session_id)
    except SessionNotFoundError:
        assert report.last_flushed is None, f"{where}: the session is gone"
        return None
    finally:
        await persistence.close()

    kept = loaded.events[: len(loaded.events) - len(loaded.repaired)]
    flushed = -1 if report.last_flushed is None else report.last_flushed
    assert len(kept) > flushed, f"{where}: only {len(kept)} events survived"
    expected = expected_events(plan.seed, len(kept))
    for stored, wanted in zip(kept, expected, strict=True):
        assert timeless(stored) == wanted, f"{where}: seq {wanted['seq']} differs"
    assert check_log(loaded.events) == [], where
    kinds = {issue.kind for issue in loaded.issues}
    assert kinds <= {"torn-tail", "interrupted-turn"}, f"{where}: {loaded.issues}"
    assert ("interrupted-turn" in kinds) == bool(loaded.repaired), f"{where}: {loaded.issues}"
    return loaded


async def check_continue(
    plan: Plan, backend: Backend, home: Path, session_id: SessionId, loaded: LoadedSession
) -> None:
    """Open the repaired session, take one more whole turn, and reload it cleanly."""
    where = f"seed {plan.seed} ({backend})"
    store = SessionStore(make_persistence(backend, home), Catalog(home), window=WINDOW)
    try:
        session = await store.open(session_id)
        # The first load wrote its repairs (closing events, the cut of a torn tail).
        assert session.load_issues == (), f"{where}: {session.load_issues}"
        assert dicts(session.events[: len(loaded.events)]) == dicts(loaded.events), where
        script = Script(
            plan.seed + 1,
            next_seq=session.next_seq,
            next_turn=session.last_turn + 1,
            id_prefix="c",
        )
        for planned in script.turn():
            session.append(planned.type, planned.data, source_event_seqs=planned.sources)
            await asyncio.sleep(0)  # the background writer takes some of it in batches
    finally:
        await store.aclose()

    persistence = make_persistence(backend, home)
    try:
        final = await persistence.load(session_id)
    finally:
        await persistence.close()
    assert final.issues == [], f"{where}: {final.issues}"
    assert check_log(final.events) == [], where
    assert dicts(final.events) == dicts(session.events), where


async def crash_round(plan: Plan, backend: Backend, home: Path) -> bool:
    """One kill and its checks; True when the session had reached storage."""
    report = await run_and_kill(plan, backend, home)
    loaded = await check_reload(plan, backend, home, report)
    if loaded is None:
        return False
    assert report.session_id is not None
    await check_continue(plan, backend, home, report.session_id, loaded)
    return True


# ---------------------------------------------------------------------- the test


@pytest.mark.parametrize("backend", list(KILLS))
async def test_killed_writers_leave_sessions_that_reload_and_continue(
    backend: Backend, tmp_path: Path
) -> None:
    gate = asyncio.Semaphore(CONCURRENT)

    async def one(index: int, plan: Plan) -> bool:
        async with gate:
            home = tmp_path / f"{index:02d}-{plan.seed}"
            return await asyncio.wait_for(crash_round(plan, backend, home), ROUND_TIMEOUT)

    todo = plans(backend)
    results = await asyncio.gather(
        *(one(i, plan) for i, plan in enumerate(todo)), return_exceptions=True
    )
    failures = [
        (plan, result)
        for plan, result in zip(todo, results, strict=True)
        if isinstance(result, BaseException)
    ]
    if failures:
        lines = [f"seed {plan.seed}: {type(error).__name__}: {error}" for plan, error in failures]
        summary = f"{len(failures)} of {len(todo)} kills failed:\n" + "\n".join(lines)
        raise AssertionError(summary) from failures[0][1]
    stored = sum(1 for result in results if result is True)
    # Most kills come after a reported flush; if none stored anything, the test
    # exercised nothing.
    assert stored >= len(todo) // 2, f"only {stored} of {len(todo)} sessions reached storage"
