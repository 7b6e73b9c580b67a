"""Resuming a session, as its length grows: time to ready and memory at 1k to 1M events.

The sessions are bench/fixtures.py's realistic ones (turns of 19 tool calls, each
step streaming reasoning, text and a tool call, ``read`` and ``bash`` results of a
few KB), written by the JSONL backend in the batches its writer makes, at about
1,300, 13,200, 100,500 and 1,000,000 events (whole turns). Each is written the way
dsh leaves it: the log, then dsh is run once on it (``dsh --resume ID``, unmeasured),
which also writes what dsh keeps beside the log; every measured run starts from the
files as that run left them (restored before each run, since a resume appends a few
events).

- **resume to ready**: ``dsh --resume ID`` in a pseudo-terminal of 100x30 (as
  bench/tui.py runs it), from the spawn until the status line shows the agent
  ``idle`` with no note beside it and ``Resumed session`` is on screen: the runtime
  loaded and the session attached. Targets: <= 0.6 s at 13,000 events, <= 0.8 s at
  100,000, <= 1 s at 1,000,000; for information at 1,300.
- **memory at ready**: the resident memory (``VmRSS``) of dsh's whole process tree
  at that moment. Target <= 120 MB at 13,000 and 100,000 events.
- **how it grows**: each size's median over the smallest's, beside the ratio of
  their event counts: flat is ~1 whatever the length, linear follows the count.

Medians of 5 runs (3 at 1,000,000 events). The 1,000,000-event log (about 450 MB)
is built in a temporary folder, streamed turn by turn, never committed; building it
takes a few minutes. ``--sizes`` picks sizes (``--sizes 10k,100k``; under ``bench/run``,
``DSH_BENCH_RESUME_SIZES=10k,100k``).

Run: .venv/bin/python bench/resume.py [--sizes 1k,10k,100k,1m]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fixtures import REPEAT, Clock, a_header, a_working_turn, writer_batches  # beside this script
from report import Sample, code_root, figure, load_now, machine, versions
from tui import dsh_argv, environment, info, places, terminal

sys.path.insert(0, str(code_root()))

from dsh.session.events import SessionEvent, is_surface_type
from dsh.session.header import SessionHeader
from dsh.session.payloads import RequestHeader

SIZES = {"1k": 1_000, "10k": 13_000, "100k": 100_000, "1m": 1_000_000}
TARGETS: dict[str, tuple[float | None, float | None]] = {
    # time to ready (s), memory at ready (MB)
    "1k": (None, None),
    "10k": (0.6, 120),
    "100k": (0.8, 120),
    "1m": (1.0, None),
}


def events_of(header: SessionHeader, events: int) -> Iterator[SessionEvent]:
    """Whole working turns (19 calls) until at least ``events`` events, stamped as
    bench/fixtures.py's ``replay`` stamps them, made a turn at a time (a 1M-event
    session is never held whole)."""
    rng = random.Random(2)
    clock = Clock(header.created_at, random.Random(header.id))
    calls: dict[str, int] = {}
    full_header = -1
    seq, turn = 0, 0
    while seq < events:
        turn += 1
        for type_, data in a_working_turn(rng, turn, 19):
            clock.advance(type_, data)
            sources: tuple[int, ...] | None = None
            if data is REPEAT:
                data = RequestHeader(reason="repeat", same_as=full_header)
            elif type_ == "tool/result":
                sources = (calls.pop(data.message.result.tool_call_id),)
            if type_ == "tool/call":
                calls[data.call_id] = seq
            elif type_ == "request/header" and data.header is not None:
                full_header = seq
            surface: Any = "append" if is_surface_type(type_) else None
            yield SessionEvent(type_, seq, clock(), data, None, surface, sources)
            seq += 1


async def build(home: Path, header: SessionHeader, events: int) -> int:
    from dsh.session.store import make_persistence

    persistence = make_persistence("jsonl", home)
    await persistence.create(header)
    made = 0
    pending: list[SessionEvent] = []
    for event in events_of(header, events):
        pending.append(event)
        made += 1
        if event.type == "turn/end":  # a turn at a time, cut as the writer cuts it
            for batch in writer_batches(pending):
                await persistence.append(header.id, batch, sync=False)
            pending = []
    await persistence.close()
    return made


def bench_size(root: Path, name: str) -> tuple[int, Sample]:
    project, home = places(root, f"resume-{name}")
    header = a_header(f"resume-{name}", str(project))
    made = asyncio.run(build(home, header, SIZES[name]))
    env = environment(root, home)
    argv = dsh_argv("--resume", header.id)
    with terminal(argv, project, env) as warm:  # bytecode cache, and what dsh keeps
        warm.wait_for(lambda t=warm: t.ready() and "Resumed session" in t.text(), 600)
        warm.process.write(b"/quit\r")  # as a person leaves it: the session closed
        warm.wait_for(lambda t=warm: not t.process.isalive(), 600)
    sessions = home / "sessions"
    kept = root / f"kept-{name}"
    shutil.copytree(sessions, kept)
    runs = 3 if name == "1m" else 5
    load = load_now()
    ready, rss = [], []
    for _ in range(runs):
        shutil.rmtree(sessions)
        shutil.copytree(kept, sessions)
        with terminal(argv, project, env) as term:
            at = term.wait_for(lambda t=term: t.ready() and "Resumed session" in t.text(), 120)
            rss.append(tree_rss(term.pid))
            ready.append(at - term.began)
    shutil.rmtree(kept)
    label = f"resume a {made:,}-event session to ready"
    time_target, rss_target = TARGETS[name]
    taken = Sample(tuple(ready))
    if time_target is None:
        print(info(label, taken, load))
    else:
        print(figure(label, taken, target=time_target, load=load))
    memory = Sample(tuple(rss))
    if rss_target is None:
        print(info(f"  memory at ready, {made:,} events, the process tree", memory, load, "MB", 0))
    else:
        print(
            figure(
                f"  memory at ready, {made:,} events, the process tree",
                memory,
                target=rss_target,
                unit="MB",
                digits=0,
                load=load,
            )
        )
    shutil.rmtree(home)
    return made, taken


def tree_rss(pid: int) -> float:
    from report import tree_rss_mb

    return tree_rss_mb(pid)


def main() -> None:
    parser = argparse.ArgumentParser()
    # bench/run passes no arguments: the environment chooses for it (--against runs).
    parser.add_argument(
        "--sizes", default=os.environ.get("DSH_BENCH_RESUME_SIZES", ",".join(SIZES))
    )
    names = [n.strip().lower() for n in parser.parse_args().sizes.split(",") if n.strip()]
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    taken: list[tuple[str, int, Sample]] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-resume-") as folder:
        for name in names:
            made, sample = bench_size(Path(folder), name)
            taken.append((name, made, sample))
    if len(taken) > 1:
        _, base_events, base = taken[0]
        for _, made, sample in taken[1:]:
            print(
                f"how it grows, {base_events:,} to {made:,} events ({made / base_events:,.0f}x "
                f"the events): {sample.median / base.median:.2f}x the time (for information)"
            )


if __name__ == "__main__":
    main()
