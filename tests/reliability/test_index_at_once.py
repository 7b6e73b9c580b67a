"""A new session is found by ``--continue`` as soon as its first event is stored,
even when dsh is killed before the session's index entry is written."""

from __future__ import annotations

import asyncio
import json
import random

from dsh.session import SessionStore
from dsh.testing import Reply
from tests.e2e.harness import Dsh

ROUNDS = 8


async def newest_stored(dsh: Dsh) -> str:
    """The newest session storage holds for the project (never asking the index)."""
    store = SessionStore.at(dsh.home)
    try:
        headers = await store.persistence.list(str(dsh.project.resolve()))
    finally:
        await store.aclose()
    return max(headers, key=lambda h: h.created_at).id


async def test_a_session_killed_in_its_first_second_is_the_one_continued(dsh: Dsh) -> None:
    rng = random.Random(18)
    dsh.server.add(Reply(text="an older session"))
    assert (await dsh.run("-p", "older")).code == 0
    for round_ in range(ROUNDS):
        # The answer never comes in time: dsh is killed while it waits, at a random
        # point of its first second or so (start-up takes about half of it).
        dsh.server.add(Reply(text="too late", first_byte_delay_ms=10_000))
        child = await dsh.start("-p", f"new session {round_}")
        await asyncio.sleep(rng.uniform(0.3, 1.5))
        child.kill()
        await child.wait()
        expected = await newest_stored(dsh)
        done = await dsh.run("-p", "/cost", "--continue", "--output-format", "json")
        result = json.loads(done.stdout.splitlines()[-1])
        assert result["sessionId"] == expected, (round_, done.stderr)
        listed = await dsh.run("sessions", "list")
        assert expected[:8] in listed.stdout
