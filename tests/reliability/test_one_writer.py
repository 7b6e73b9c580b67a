"""One writer per session: two processes on one session never corrupt its log.

Two writer processes race for one session 50 times; each time exactly one wins, the
other gets the clear message (who holds it, and what to do instead), and the log
always loads with no gap, no repeated seq and every turn. Then the same with two real
``dsh -p --resume`` runs, and the ways out: ``--wait`` and ``--fork-session``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.llm import PluginSource, UserMessage
from dsh.session import SessionEvent, SessionStore, check_log
from dsh.testing import Reply
from tests.e2e.harness import TIMEOUT, Dsh, finish
from tests.session.turns import complete_turn

ROUNDS = 50
ROOT = Path(__file__).resolve().parent.parent.parent


class Writer:
    """A :mod:`tests.support.session_writer` process."""

    def __init__(self, child: asyncio.subprocess.Process) -> None:
        self.child = child

    @classmethod
    async def start(cls, home: Path, backend: str) -> Writer:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.session_writer", str(home), backend,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
        )  # fmt: skip
        return cls(child)

    def send(self, line: str) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write(line.encode() + b"\n")

    async def answer(self) -> dict[str, Any]:
        assert self.child.stdout is not None
        line = await asyncio.wait_for(self.child.stdout.readline(), TIMEOUT)
        assert line, "the writer process ended"
        return json.loads(line)  # type: ignore[no-any-return]

    async def stop(self) -> None:
        if self.child.returncode is None:
            assert self.child.stdin is not None
            self.child.stdin.close()
            try:
                await asyncio.wait_for(self.child.wait(), TIMEOUT)
            except TimeoutError:
                self.child.kill()
                await self.child.wait()


@pytest.fixture
async def writers(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[list[Writer]]:
    started = [await Writer.start(tmp_path, request.param) for _ in range(2)]
    yield started
    for writer in started:
        await writer.stop()


@pytest.mark.parametrize("writers", ["jsonl", "sqlite"], indirect=True)
async def test_two_writers_race_for_one_session_fifty_times(
    tmp_path: Path, writers: list[Writer], request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["writers"]
    store = SessionStore.at(tmp_path, backend)
    session = await store.create("/w")
    complete_turn(session, "start", "ok", with_tool=False)
    await store.close(session)
    await store.aclose()

    wins = [0, 0]
    for round_ in range(ROUNDS):
        # Both are told at once; the order of the two writes alternates.
        order = writers if round_ % 2 == 0 else writers[::-1]
        for writer in order:
            writer.send(f"open {session.id}")
        answers = [await writer.answer() for writer in writers]
        won = [answer["won"] for answer in answers]
        assert sorted(won) == [False, True], answers
        winner, loser = (0, 1) if won[0] else (1, 0)
        wins[winner] += 1
        message = answers[loser]["error"]
        assert f"pid {answers[winner]['pid']}" in message
        assert f"dsh sessions show {session.id[:8]}" in message
        assert "--fork-session" in message
        assert "--wait" in message
        writers[winner].send("close")
        assert await writers[winner].answer() == {"closed": True}

    assert all(wins), f"one process won every round: {wins}"  # a real race
    check = SessionStore.at(tmp_path, backend)
    try:
        loaded = await check.persistence.inspect(session.id)
    finally:
        await check.aclose()
    assert loaded.issues == []
    assert [e.seq for e in loaded.events] == list(range(len(loaded.events)))
    assert check_log(loaded.events) == []
    turns = [e for e in loaded.events if e.type == "turn/end"]
    assert len(turns) == 1 + 2 * ROUNDS  # nothing lost


async def test_two_dsh_runs_on_one_session(dsh: Dsh) -> None:
    dsh.server.add(Reply(text="first answer"))
    done = await dsh.run("-p", "one")
    assert done.code == 0, done.stderr
    [session_id] = await dsh.session_ids()

    # A run holds the session while its (slow) answer streams; a second one started
    # meanwhile says who holds it and what to do, and writes nothing.
    dsh.server.add(Reply(text="slow answer", gate="holder"))
    holder = await dsh.start("-p", "two", "--resume", session_id)
    # Once its request has arrived it holds the lock (taken as it opened the session),
    # and it keeps it while its answer is held back.
    async with asyncio.timeout(TIMEOUT):
        while len(dsh.server.chat_requests) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    second = await dsh.run("-p", "three", "--resume", session_id[:8])
    assert second.code == 1
    assert f"session {session_id[:8]} is open in another dsh (pid {holder.pid}" in second.stderr
    assert "--fork-session" in second.stderr
    assert "--wait" in second.stderr
    assert len(dsh.server.chat_requests) == 2  # the second run asked nothing

    # --wait: goes on once the first run has closed the session. (A head start to
    # reach the lock before the holder's answer is let through; should it not get
    # there first, it finds the session free, which the asserts below accept too.)
    dsh.server.add(Reply(text="waited answer"))
    waiting = await dsh.start("-p", "four", "--resume", session_id, "--wait")
    await asyncio.sleep(0.5)
    dsh.server.open_gate("holder")
    first = await finish(holder)
    assert first.code == 0, first.stderr
    assert "slow answer" in first.stdout
    waited = await finish(waiting)
    assert waited.code == 0, waited.stderr
    assert "waited answer" in waited.stdout

    events = await dsh.checked_events(session_id)
    assert typed(events) == ["one", "two", "four"]

    # --fork-session: a new session seeded with this one, which stays as it was.
    dsh.server.add(Reply(text="forked answer"))
    forked = await dsh.run("-p", "five", "--resume", session_id, "--fork-session")
    assert forked.code == 0, forked.stderr
    assert "forked answer" in forked.stdout
    ids = await dsh.session_ids()
    assert len(ids) == 2
    assert len(await dsh.events(session_id)) == len(events)
    [fork_id] = [i for i in ids if i != session_id]
    assert typed(await dsh.events(fork_id)) == ["one", "two", "four", "five"]


def typed(events: list[SessionEvent]) -> list[str]:
    """What the person said, in order (not the context plugins added)."""
    return [
        e.data.text()
        for e in events
        if isinstance(e.data, UserMessage) and not isinstance(e.data.source, PluginSource)
    ]
