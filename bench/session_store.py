"""Session storage: append throughput, loading a long session, catalog list and search.

Every figure is the median of 5 runs with the fastest and slowest beside it and the
machine's load sampled before the runs (bench/report.py); the verdict is the median's.

Targets (the session-store issue):

- append, JSONL backend: >= 50,000 events/s with step-boundary fsync excluded.
  ``Session.append`` with the store's writer subscribed (0.2 s window, boundaries
  written at once), then a final flush. The producer yields to the event loop after
  every append, as one reading a stream does, so the writer runs as in production.
  ``os.fsync`` is replaced by a no-op in this process for that run. The events are
  the delta-heavy mix below (the most events for a session's size); for information
  the same with fsync, and with the realistic session of bench/fixtures.py.
- loading a realistic 100,000-event session (JSONL): <= 2 s, from ``load`` called on
  a new backend object (nothing cached) until it returns every event. The session is
  bench/fixtures.py's, built the same way as the 20-turn one the TUI resumes: turns of
  19 tool calls, each step streaming reasoning, text and a tool call, the ``read`` and
  ``bash`` results a few KB each (about 100,500 events: whole turns). It is written in
  the batches the writer would make at 40 deltas/s, so delta runs are packed a 0.2 s
  window at a time. The SQLite figure, and opening it (load, then rebuild the live
  ``Session``), are printed for information.
- listing 1,000 sessions from the catalog (all, and one directory's): <= 100 ms.
- searching them (a word some sessions hold, and one none holds): <= 200 ms.

The append and catalog mix is a chatty session's: turns of one or two steps, each
step a text block streamed as 40 to 250 one-token deltas, then the assistant message;
a user prompt opens every turn. Fixtures live in a temporary directory.

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

import fixtures  # bench/fixtures.py, beside this script
from report import RUNS, Sample, figure, load_now, machine, versions  # bench/report.py

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
from dsh.session.events import SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.jsonl import JsonlPersistence
from dsh.session.payloads import (
    AssistantChunk,
    AssistantMessageData,
    PromptTrigger,
    StepEnd,
    StepStart,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
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


async def timed(action: Callable[[], Awaitable[object]], runs: int = RUNS) -> Sample:
    """Seconds of each of ``runs`` runs of ``action``."""
    values = []
    for _ in range(runs):
        start = time.perf_counter()
        await action()
        values.append(time.perf_counter() - start)
    return Sample(tuple(values))


def info(
    label: str, taken: Sample, load: str, unit: str = "s", digits: int = 2, scale: float = 1.0
) -> str:
    """A figure with no target: no verdict, so bench/run does not count it."""
    return f"{label}: {taken.shown(unit, digits, scale)}; {load}; for information)"


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


Cited = Sequence[tuple[str, Any, tuple[int, ...] | None]]
"""Events to append, each with the seqs it cites (a tool/result its tool/call)."""


def cited(events: Sequence[SessionEvent]) -> Cited:
    return [(e.type, e.data, e.source_event_seqs) for e in events]


async def append_run(home: Path, plan: Cited) -> tuple[float, int]:
    """Seconds from the first append until the flush after the last, yielding to the
    loop after every append (as a producer awaiting its stream does); and how many
    batches the writer wrote."""
    persistence = CountingJsonl(home)
    store = SessionStore(persistence, catalog=None, window=WINDOW)
    session = await store.create("/home/dev/bench")
    start = time.perf_counter()
    for type_, data, sources in plan:
        session.append(type_, data, source_event_seqs=sources)
        await asyncio.sleep(0)
    assert await store.flush(session)
    assert await store.close(session)
    elapsed = time.perf_counter() - start
    await store.aclose()
    assert persistence.batches > 0
    return elapsed, persistence.batches


async def append_rates(root: Path, plan: Cited, runs: int = RUNS) -> tuple[Sample, int]:
    """Events/s of each of ``runs`` runs, and the batches the first run wrote."""
    rates, batches = [], 0
    for _ in range(runs):
        elapsed, written = await append_run(Path(tempfile.mkdtemp(dir=root)), plan)
        rates.append(len(plan) / elapsed)
        batches = batches or written
    return Sample(tuple(rates)), batches


async def bench_append(root: Path) -> None:
    plan = a_long_session(random.Random(1), APPEND_EVENTS)
    boundaries = sum(1 for type_, _ in plan if type_ in BOUNDARY_TYPES)
    load = load_now()
    with fsync_excluded():
        rates, batches = await append_rates(root, [(t, d, None) for t, d in plan])
    print(
        figure(
            f"append, JSONL, fsync excluded (os.fsync a no-op in this process), "
            f"{len(plan):,} events, {boundaries:,} of them turn ends (the writer's boundaries), written in "
            f"{batches:,} batches",
            rates,
            target=APPEND_TARGET,
            unit="events/s",
            digits=0,
            at_least=True,
            load=load,
        )
    )
    load = load_now()
    with_fsync, batches = await append_rates(root, [(t, d, None) for t, d in plan])
    print(info(f"  fsync included ({batches:,} batches)", with_fsync, load, "events/s", 0))

    working = fixtures.replay(
        fixtures.a_header(), fixtures.a_working_session(random.Random(4), turns=40)
    ).events
    load = load_now()
    with fsync_excluded():
        realistic, batches = await append_rates(root, cited(working))
    print(
        info(
            f"  fsync excluded, the realistic session of bench/fixtures.py (40 turns of 19 "
            f"calls, {len(working):,} events, {batches:,} batches)",
            realistic,
            load,
            "events/s",
            0,
        )
    )

    load = load_now()
    alone = await timed(lambda: append_only(plan))
    idle = await timed(lambda: yield_only(len(plan)))
    total = len(plan) / rates.median
    print(
        f"  where a run's {total:.2f} s go (medians of {RUNS}): Session.append alone "
        f"{alone.median:.2f} s, the harness's yields {idle.median:.2f} s, the writer "
        f"(queueing, encoding, batches to and from the file thread) the other "
        f"{total - alone.median - idle.median:.2f} s; {load}"
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
    header = fixtures.a_header("load-100k", "/home/dev/bench", 1_780_000_000_000)
    events = fixtures.replay(header, fixtures.a_large_working_session(random.Random(2))).events
    with fsync_excluded():  # building the fixture only
        for backend in ("jsonl", "sqlite"):
            persistence = make_persistence(backend, home)
            await persistence.create(header)
            for batch in fixtures.writer_batches(events):
                await persistence.append(header.id, batch)
            await persistence.close()
    path = JsonlPersistence(home).path_for(header)
    records = len(path.read_bytes().splitlines()) - 1  # less the header
    size = path.stat().st_size / 2**20

    backends: tuple[Backend, ...] = ("jsonl", "sqlite")
    for backend in backends:

        async def load_once(backend: Backend = backend) -> None:
            persistence = make_persistence(backend, home)  # nothing cached
            try:
                loaded = await persistence.load(header.id)
            finally:
                await persistence.close()
            assert len(loaded.events) == len(events)
            assert not loaded.issues

        load = load_now()
        taken = await timed(load_once)
        label = f"load a realistic {len(events):,}-event session, {backend}"
        if backend == "jsonl":
            label += f" ({records:,} records, {size:.1f} MiB)"
            print(figure(label, taken, target=LOAD_TARGET, load=load))
        else:
            print(info(f"  {label}", taken, load))

    async def open_once() -> None:
        store = SessionStore(JsonlPersistence(home), catalog=None)
        try:
            session = await store.open(header.id)
            assert session.next_seq == len(events) + 1  # open adds a session/end-seed
        finally:
            await store.aclose()

    load = load_now()
    print(
        info("  open it (load, then rebuild the live Session), jsonl", await timed(open_once), load)
    )


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

    for label, action in (
        (
            f"catalog list, all {CATALOG_SESSIONS:,} (the first call, opening the "
            f"catalog, took {cold * 1000:.1f} ms)",
            list_all,
        ),
        (f"catalog list, one directory ({CATALOG_SESSIONS // PROJECTS})", list_cwd),
    ):
        load = load_now()
        taken = await timed(action)
        print(
            figure(
                label, taken, target=LIST_TARGET * 1000, unit="ms", digits=1, scale=1000, load=load
            )
        )

    for word, expect, note in (
        (RARE_WORD, True, "in 1 session of 20"),
        (ABSENT_WORD, False, "in none"),
        (COMMON_WORD, True, "in nearly all"),
    ):

        async def search(word: str = word, expect: bool = expect) -> None:
            assert bool(await catalog.search(word)) == expect

        load = load_now()
        taken = await timed(search)
        hits = len(await catalog.search(word))
        label = f"catalog search {word!r} ({note}, {hits} hits)"
        if word == COMMON_WORD:
            print(info(f"  {label}", taken, load, "ms", 1, 1000))
        else:
            print(
                figure(
                    label,
                    taken,
                    target=SEARCH_TARGET * 1000,
                    unit="ms",
                    digits=1,
                    scale=1000,
                    load=load,
                )
            )
    await catalog.close()


async def main() -> None:
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as temp:
        root = Path(temp)
        await bench_append(root)
        await bench_load(root)
        await bench_catalog(root)


if __name__ == "__main__":
    asyncio.run(main())
