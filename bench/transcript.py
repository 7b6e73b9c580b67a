"""The transcript with huge inputs: a 20,000-line diff shown, a long session folded.

Targets (what tests/reliability/test_limits.py held before durations left the tests):

- a tool card's 20,000-line diff (a 10,000-line file rewritten whole, as the write
  tool reports it), rendered collapsed as the transcript first shows it: <= 1 s, so
  the card comes without a stall; rendered expanded (every line): <= 15 s. Rich
  renders each into a 100-column console writing to memory; medians of 5.
- for information, what a resume does with a session of 100,000 events (the event
  mix of bench/session_store.py): deriving the model's history, and folding the events
  into the transcript's entries. Medians of 3.

Run: .venv/bin/python bench/transcript.py
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable
from typing import Any

from report import figure, load_now, machine, sample  # bench/report.py, beside this script
from rich.console import Console
from session_store import LOAD_EVENTS, a_header, a_long_session, replay

from dsh.session import Session
from dsh.tools.presentation import CallResult
from dsh.ui.entries import TranscriptFold
from dsh.ui.render import render_presentation
from dsh_plugins.fs.changes import unified_diff
from dsh_plugins.fs.edit import WRITE_VIEWS

DIFF_LINES = 10_000  # rows of the file: each removed and added again
COLLAPSED_TARGET = 1.0  # s
EXPANDED_TARGET = 15.0  # s


def timed(action: Callable[[], object]) -> Callable[[], float]:
    def measure() -> float:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    return measure


def rendered(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=100, color_system="truecolor")
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]


def bench_diff() -> None:
    before = "".join(f"ROW_{n} = {n}\n" for n in range(DIFF_LINES))
    after = "".join(f"ROW_{n} = {n * 2}  # doubled\n" for n in range(DIFF_LINES))
    diff = unified_diff(before, after, "table.py")
    meta = {"path": "table.py", "diff": diff.text, "added": diff.added, "removed": diff.removed}
    view = WRITE_VIEWS[1](
        {"file_path": "table.py", "content": after},
        CallResult(text="Updated table.py", error_code=None, meta=meta),
    )
    rows = diff.added + diff.removed
    for expanded, target in ((False, COLLAPSED_TARGET), (True, EXPANDED_TARGET)):
        load = load_now()
        taken = sample(timed(lambda e=expanded: rendered(render_presentation(view, expanded=e))))
        shown = len(rendered(render_presentation(view, expanded=expanded)).splitlines())
        label = f"a {rows:,}-line diff rendered {'expanded' if expanded else 'collapsed'}"
        print(figure(f"{label} ({shown:,} lines)", taken, target=target, load=load))


def bench_session() -> None:
    header = a_header("transcript-100k", "/home/dev/bench", 1_780_000_000_000)
    session = replay(header, a_long_session(random.Random(2), LOAD_EVENTS))
    events = session.events

    def fold() -> None:
        folded = TranscriptFold()
        for event in events:
            folded.apply(event)

    def derive() -> None:
        Session(header, events).derive_messages()  # a new one: the history is kept

    taken = sample(timed(derive), 3)
    print(
        f"rebuild a live session of {len(events):,} events and derive its history "
        f"(for information): {taken.shown()})"
    )
    taken = sample(timed(fold), 3)
    print(f"fold {len(events):,} events into the transcript (for information): {taken.shown()})")


def main() -> None:
    print(f"machine: {machine()}")
    bench_diff()
    bench_session()


if __name__ == "__main__":
    main()
