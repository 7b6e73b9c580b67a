"""Session storage: append throughput, loading a long session, catalog list and search.

Targets (the session-store issue):

- append, JSONL backend: >= 50,000 events/s with step-boundary fsync excluded.
  ``Session.append`` with the store's writer subscribed (0.2 s window, boundaries
  written at once), then a final flush. The producer yields to the event loop after
  every append, as one reading a stream does, so the writer runs as in production.
  ``os.fsync`` is replaced by a no-op in this process for that run; the figure with
  fsync is printed too, for information.
- loading a 100,000-event session (JSONL): <= 2 s. The SQLite figure is printed too.
  The fixture is written in the batches the writer would make at 40 tokens/s, so
  delta runs are packed a 0.2 s window at a time.
- listing 1,000 sessions from the catalog (all, and one directory's): <= 100 ms.
- searching them (a word some sessions hold, and one none holds): <= 200 ms.

The event mix is a coding session's: turns of one or two steps, each step a text
block streamed as 40 to 250 one-token deltas, then the assistant message; a user
prompt opens every turn. Fixtures live in a temporary directory.

Run: .venv/bin/python bench/session_store.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from report import machine, verdict  # bench/report.py, beside this script

from dsh.llm import (
    AssistantMessage,
    BlockEnd,
    BlockStart,
    ModelSource,
    SessionId,
    TextBlock,
    TextDelta,
    TokenUsage,
    user_text,
)
from dsh.session.catalog import Catalog
from dsh.session.events import (
    AssistantChunk,
    AssistantMessageData,
    PromptTrigger,
    SessionEvent,
    StepEnd,
    StepStart,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
from dsh.session.header import SessionHeader
from dsh.session.jsonl import JsonlPersistence
from dsh.session.session import Session
from dsh.session.store import Backend, SessionStore, make_persistence
from dsh.session.writer import BOUNDARY_TYPES

APPEND_TARGET = 50_000  # events/s
LOAD_TARGET = 2.0  # s
LIST_TARGET = 0.100  # s
SEARCH_TARGET = 0.200  # s

APPEND_EVENTS = 100_000
LOAD_EVENTS = 100_000
CATALOG_SESSIONS = 1_000
PROJECTS = 20

WINDOW = 0.2  # the writer window SessionStore uses by default
TOKEN_MS = 25  # simulated time between deltas in the stored fixtures (40 tokens/s)

RARE_WORD = "quokka"  # in one session of every 20
ABSENT_WORD = "zanzibar"  # in none
COMMON_WORD = "function"  # in nearly every session (for information)

VOCABULARY = """
the a to of and in is it that for this with on we file test line code function return
value error call path module class import change update check run build read write config
result type list field name parse load store event session step turn model user tool output
input index search query table row batch flush
"""
WORDS = VOCABULARY.split()

Plan = list[tuple[str, Any]]


# ---------------------------------------------------------------------- the event mix


def a_turn(rng: random.Random, turn: int, steps: int, deltas: Sequence[int], prompt: str) -> Plan:
    """One turn: a prompt, then per step a streamed text block and its message."""
    plan: Plan = [
        ("turn/start", TurnStart(turn=turn, trigger=PromptTrigger())),
        ("user/message", user_text(prompt)),
    ]
    for step in range(1, steps + 1):
        tokens = [" " + rng.choice(WORDS) for _ in range(deltas[step - 1])]
        text = "".join(tokens).strip()
        plan.append(("step/start", StepStart(turn=turn, step=step)))
        plan.append(
            (
                "assistant/chunk",
                AssistantChunk(turn=turn, step=step, chunk=BlockStart(index=0, block_type="text")),
            )
        )
        plan += [
            (
                "assistant/chunk",
                AssistantChunk(turn=turn, step=step, chunk=TextDelta(index=0, text=t)),
            )
            for t in tokens
        ]
        plan.append(
            (
                "assistant/chunk",
                AssistantChunk(
                    turn=turn, step=step, chunk=BlockEnd(index=0, block=TextBlock(text=text))
                ),
            )
        )
        message = AssistantMessage(
            content=(TextBlock(text=text),),
            source=ModelSource(provider="deepseek", model="deepseek-v4-flash"),
        )
        usage = TokenUsage(input_tokens=2_000 + 300 * turn, output_tokens=len(tokens))
        plan.append(
            (
                "assistant/message",
                AssistantMessageData(turn=turn, step=step, message=message, usage=usage),
            )
        )
        plan.append(("step/end", StepEnd(turn=turn, step=step)))
    plan.append(("turn/end", TurnEnd(turn=turn, reason=TurnCompleted())))
    return plan


def a_prompt(rng: random.Random, extra: str = "") -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 30))]
    if extra:
        words.insert(rng.randrange(len(words) + 1), extra)
    return " ".join(words)


def a_long_session(rng: random.Random, events: int) -> Plan:
    """Exactly ``events`` events of whole turns."""
    plan: Plan = []
    turn = 0
    while len(plan) < events:
        turn += 1
        left = events - len(plan)
        if left <= 1_000:  # the last turn: one step that fills the rest
            plan += a_turn(rng, turn, 1, [left - 8], a_prompt(rng))
        else:
            steps = rng.choice((1, 2))
            plan += a_turn(
                rng, turn, steps, [rng.randint(40, 250) for _ in range(steps)], a_prompt(rng)
            )
    assert len(plan) == events
    return plan


class Clock:
    """Simulated time for fixtures: a token every TOKEN_MS, prompts minutes apart."""

    def __init__(self, start: int) -> None:
        self.now = start

    def advance(self, type_: str, data: Any) -> None:
        if type_ == "turn/start":
            self.now += 60_000
        elif type_ == "assistant/chunk" and isinstance(data.chunk, TextDelta):
            self.now += TOKEN_MS
        else:
            self.now += 5

    def __call__(self) -> int:
        return self.now


def a_header(session_id: str, cwd: str, created_at: int) -> SessionHeader:
    return SessionHeader(
        id=SessionId(session_id), created_at=created_at, cwd=cwd, model="deepseek-v4-flash"
    )


def replay(header: SessionHeader, plan: Plan) -> Session:
    """The session ``plan`` makes, stamped with simulated time."""
    clock = Clock(header.created_at)
    session = Session(header, clock=clock)
    for type_, data in plan:
        clock.advance(type_, data)
        session.append(type_, data)
    return session


def writer_batches(events: Sequence[SessionEvent]) -> Iterator[Sequence[SessionEvent]]:
    """The batches the writer would have written at the simulated pace: cut at every
    turn or step boundary, and when the window opened by a batch's first event ends."""
    start = 0
    for i, event in enumerate(events):
        if event.type in BOUNDARY_TYPES or event.time - events[start].time >= WINDOW * 1000:
            yield events[start : i + 1]
            start = i + 1
    if start < len(events):
        yield events[start:]


# ---------------------------------------------------------------------- helpers


@contextlib.contextmanager
def fsync_excluded() -> Iterator[None]:
    """``os.fsync`` does nothing in this process while inside (SQLite's own syncs are
    untouched; the catalog takes no part in the append figure)."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


async def best_of(runs: int, action: Callable[[], Awaitable[object]]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        await action()
        best = min(best, time.perf_counter() - start)
    return best


class CountingJsonl(JsonlPersistence):
    """The JSONL backend, counting the batches it is given."""

    batches = 0

    async def append(
        self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
    ) -> None:
        if events:
            self.batches += 1
        await super().append(session_id, events, sync=sync)


# ---------------------------------------------------------------------- 1. append


async def append_run(home: Path, plan: Plan) -> tuple[float, int]:
    """Seconds from the first append until the flush after the last, yielding to the
    loop after every append (as a producer awaiting its stream does); and how many
    batches the writer wrote."""
    persistence = CountingJsonl(home)
    store = SessionStore(persistence, catalog=None, window=WINDOW)
    session = await store.create("/home/dev/bench")
    start = time.perf_counter()
    for type_, data in plan:
        session.append(type_, data)
        await asyncio.sleep(0)
    assert await store.flush(session)
    assert await store.close(session)
    elapsed = time.perf_counter() - start
    await store.aclose()
    assert persistence.batches > 0
    return elapsed, persistence.batches


async def best_append(root: Path, plan: Plan, runs: int) -> tuple[float, int]:
    """The best events/s of ``runs`` runs, and the batches that run wrote."""
    best, batches = float("inf"), 0
    for _ in range(runs):
        elapsed, written = await append_run(Path(tempfile.mkdtemp(dir=root)), plan)
        if elapsed < best:
            best, batches = elapsed, written
    return len(plan) / best, batches


async def bench_append(root: Path) -> None:
    plan = a_long_session(random.Random(1), APPEND_EVENTS)
    boundaries = sum(1 for type_, _ in plan if type_ in BOUNDARY_TYPES)
    with fsync_excluded():
        rate, batches = await best_append(root, plan, 5)
    print(
        f"append, JSONL, fsync excluded (os.fsync a no-op in this process): "
        f"{rate:,.0f} events/s ({len(plan):,} events, {boundaries:,} of them turn/step "
        f"boundaries, written in {batches:,} batches; target >= {APPEND_TARGET:,}: "
        f"{verdict(rate >= APPEND_TARGET)})"
    )
    with_fsync, batches = await best_append(root, plan, 2)
    print(f"  fsync included: {with_fsync:,.0f} events/s ({batches:,} batches; for information)")

    alone = await best_of(3, lambda: append_only(plan))
    idle = await best_of(3, lambda: yield_only(len(plan)))
    total = len(plan) / rate
    print(
        f"  where a run's {total:.2f} s go: Session.append alone {alone:.2f} s, the harness's "
        f"yields {idle:.2f} s, the writer (queueing, encoding, batches to and from the "
        f"file thread) the other {total - alone - idle:.2f} s"
    )


async def append_only(plan: Plan) -> None:
    session = Session(a_header("alone", "/home/dev/bench", 1_780_000_000_000))
    for type_, data in plan:
        session.append(type_, data)


async def yield_only(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------- 2. load


async def bench_load(root: Path) -> None:
    home = root / "load"
    header = a_header("load-100k", "/home/dev/bench", 1_780_000_000_000)
    events = replay(header, a_long_session(random.Random(2), LOAD_EVENTS)).events
    with fsync_excluded():  # building the fixture only
        for backend in ("jsonl", "sqlite"):
            persistence = make_persistence(backend, home)
            await persistence.create(header)
            for batch in writer_batches(events):
                await persistence.append(header.id, batch)
            await persistence.close()
    path = JsonlPersistence(home).path_for(header)
    records = len(path.read_bytes().splitlines()) - 1  # less the header

    backends: tuple[Backend, ...] = ("jsonl", "sqlite")
    for backend in backends:
        seconds = float("inf")
        for _ in range(3):
            persistence = make_persistence(backend, home)  # nothing cached
            began = time.perf_counter()
            loaded = await persistence.load(header.id)
            seconds = min(seconds, time.perf_counter() - began)
            assert len(loaded.events) == LOAD_EVENTS
            assert not loaded.issues
            await persistence.close()
        line = f"load {LOAD_EVENTS:,} events, {backend}: {seconds:.2f} s"
        if backend == "jsonl":
            size = path.stat().st_size / 2**20
            print(
                f"{line} ({records:,} records, {size:.1f} MiB; "
                f"target <= {LOAD_TARGET:.0f} s: {verdict(seconds <= LOAD_TARGET)})"
            )
        else:
            print(f"  {line} (for information)")

    best = float("inf")
    for _ in range(3):
        store = SessionStore(JsonlPersistence(home), catalog=None)
        began = time.perf_counter()
        session = await store.open(header.id)
        best = min(best, time.perf_counter() - began)
        assert session.next_seq == LOAD_EVENTS + 1  # open adds a session/end-seed
        await store.aclose()
    print(f"  open (load, then rebuild the live Session), jsonl: {best:.2f} s (for information)")


# ---------------------------------------------------------------------- 3, 4. catalog


async def build_catalog(home: Path) -> None:
    """1,000 sessions of one to six turns across 20 directories, each recorded in the
    catalog at once (what the writer's batches add up to)."""
    rng = random.Random(3)
    catalog = Catalog(home)
    start = 1_770_000_000_000
    for i in range(CATALOG_SESSIONS):
        cwd = f"/home/dev/project-{i % PROJECTS:02d}"
        header = a_header(f"s{i:04d}-{rng.getrandbits(48):012x}", cwd, start + i * 3_600_000)
        plan: Plan = []
        for turn in range(1, rng.randint(1, 6) + 1):
            extra = RARE_WORD if i % 20 == 0 and turn == 1 else ""
            steps = rng.choice((1, 2))
            deltas = [rng.randint(20, 80) for _ in range(steps)]
            plan += a_turn(rng, turn, steps, deltas, a_prompt(rng, extra))
        session = replay(header, plan)
        await catalog.record(
            header,
            session.events,
            backend="jsonl",
            location=f"{home}/sessions/{header.id}/session.jsonl",
        )
    await catalog.close()


async def bench_catalog(root: Path) -> None:
    home = root / "catalog"
    await build_catalog(home)
    catalog = Catalog(home)
    cwd = "/home/dev/project-07"

    start = time.perf_counter()
    listed = await catalog.list()
    cold = time.perf_counter() - start
    assert len(listed) == CATALOG_SESSIONS

    async def list_all() -> None:
        assert len(await catalog.list()) == CATALOG_SESSIONS

    async def list_cwd() -> None:
        assert len(await catalog.list(cwd=cwd)) == CATALOG_SESSIONS // PROJECTS

    seconds = await best_of(5, list_all)
    print(
        f"catalog list, all {CATALOG_SESSIONS:,}: {seconds * 1000:.1f} ms "
        f"(target <= {LIST_TARGET * 1000:.0f} ms: {verdict(seconds <= LIST_TARGET)}; "
        f"first call, opening the catalog: {cold * 1000:.1f} ms)"
    )
    seconds = await best_of(5, list_cwd)
    print(
        f"catalog list, one directory ({CATALOG_SESSIONS // PROJECTS}): {seconds * 1000:.1f} ms "
        f"(target <= {LIST_TARGET * 1000:.0f} ms: {verdict(seconds <= LIST_TARGET)})"
    )

    for word, expect, note in (
        (RARE_WORD, True, "in 1 session of 20"),
        (ABSENT_WORD, False, "in none"),
        (COMMON_WORD, True, "in nearly all; for information"),
    ):

        async def search(word: str = word, expect: bool = expect) -> None:
            assert bool(await catalog.search(word)) == expect

        seconds = await best_of(5, search)
        hits = len(await catalog.search(word))
        judged = (
            ""
            if "information" in note
            else f"; target <= {SEARCH_TARGET * 1000:.0f} ms: {verdict(seconds <= SEARCH_TARGET)}"
        )
        print(f"catalog search {word!r} ({note}): {seconds * 1000:.1f} ms ({hits} hits{judged})")
    await catalog.close()


async def main() -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as temp:
        root = Path(temp)
        await bench_append(root)
        await bench_load(root)
        await bench_catalog(root)


if __name__ == "__main__":
    asyncio.run(main())
