"""A long day in one process: ``dsh --plain`` through 10,000 model requests.

Targets (issue 34, "flat over a long day"):

- resident memory, grown per 1,000 requests once the first 1,000 are done: <= 0.5 MB
  (the median of the nine windows from request 1,000 to 10,000);
- CPU per request (user and system, the dsh process alone): <= 10 ms, the median of the
  19 windows of 500 requests after the first 500 (which carry the start-up);
- open file descriptors and open sockets of the dsh process, read every 100 requests
  after the first 500: medians <= 16 and <= 4, their maxima printed beside them.

The run is :mod:`tests.reliability.soak`'s, ten times the test's: 200 sessions
(``/new`` between them) of 5 turns of 10 requests (9 ``echo`` tool steps, then an
answer), from the scripted server, which keeps connections alive for one session and
closes each after its response for the next, so half the requests each way. Every
session's history is the same size, so what grows is what the process keeps. Each
"run" of a figure is one window of the one run (the process is read from ``/proc`` as
the server answers every 100th request). The readings go to ``docs/soak.csv`` and are
plotted in ``docs/soak.svg`` (memory, descriptors and sockets, CPU per request, each
against the requests answered).

Run: .venv/bin/python bench/soak.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from report import Sample, code_root, figure, load_now, machine  # bench/report.py, beside this

ROOT = Path(__file__).resolve().parent.parent
# The driver is the test's (loaded from its file: bench/ is not a package, and
# `bench/run --against` puts another tree's `tests` first on the path).
_spec = importlib.util.spec_from_file_location(
    "soak_driver", ROOT / "tests" / "reliability" / "soak.py"
)
assert _spec is not None
assert _spec.loader is not None
driver = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = driver
_spec.loader.exec_module(driver)

EVERY = 100
WINDOW = 500
WARM = 1_000
RSS_TARGET_MB = 0.5  # grown per 1,000 requests
CPU_TARGET_MS = 10.0
FD_TARGET = 16
SOCKET_TARGET = 4
LIMIT_S = 3600.0  # a hang guard for the whole run


def readings_at(readings: Sequence[driver.Reading], step: int, start: int) -> list[driver.Reading]:
    """The readings taken at ``start``, ``start + step``, ... (one each)."""
    by_count = {r.requests: r for r in readings}
    return [by_count[n] for n in sorted(by_count) if n >= start and (n - start) % step == 0]


def per_window(
    readings: Sequence[driver.Reading],
    step: int,
    start: int,
    value: Callable[[driver.Reading, driver.Reading], float],
) -> Sample:
    marks = readings_at(readings, step, start)
    return Sample(tuple(value(a, b) for a, b in itertools.pairwise(marks)))


def write_csv(path: Path, readings: Sequence[driver.Reading]) -> None:
    lines = ["requests,seconds,rss_mb,fds,sockets,cpu_s,cpu_ms_per_request"]
    previous: driver.Reading | None = None
    for r in readings:
        per = ""
        if previous is not None and r.requests > previous.requests:
            per = f"{(r.cpu_s - previous.cpu_s) * 1000 / (r.requests - previous.requests):.2f}"
        lines.append(
            f"{r.requests},{r.at_s:.2f},{r.rss_kib / 1024:.2f},{r.fds},{r.sockets},"
            f"{r.cpu_s:.2f},{per}"
        )
        previous = r
    path.write_text("\n".join(lines) + "\n")


def write_svg(path: Path, readings: Sequence[driver.Reading], title: str) -> None:
    """Three panels over the requests answered: memory; descriptors and sockets; CPU
    per request (over each interval between readings)."""
    width, panel, left, top, gap = 760, 150, 70, 40, 40
    plot_w = width - left - 20
    xs = [r.requests for r in readings]
    x_max = max(xs) or 1
    cpu = [
        (b.requests, (b.cpu_s - a.cpu_s) * 1000 / (b.requests - a.requests))
        for a, b in itertools.pairwise(readings)
        if b.requests > a.requests
    ]
    panels: list[tuple[str, list[tuple[str, str, list[tuple[int, float]]]]]] = [
        (
            "resident memory (MB)",
            [("RSS", "#1f77b4", [(r.requests, r.rss_kib / 1024) for r in readings])],
        ),
        (
            "open descriptors",
            [
                ("file descriptors", "#2ca02c", [(r.requests, float(r.fds)) for r in readings]),
                ("sockets", "#d62728", [(r.requests, float(r.sockets)) for r in readings]),
            ],
        ),
        ("CPU per request (ms)", [("CPU", "#9467bd", cpu)]),
    ]
    height = top + len(panels) * (panel + gap) + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="13">{_escape(title)}</text>',
    ]
    for index, (name, series) in enumerate(panels):
        y0 = top + index * (panel + gap)
        values = [v for _, _, points in series for _, v in points] or [0.0]
        y_max = max(values) * 1.1 or 1.0
        out.append(f'<text x="{left}" y="{y0 - 6}">{_escape(name)}</text>')
        out.append(
            f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel}" fill="none" '
            'stroke="#999"/>'
        )
        for fraction in (0.0, 0.5, 1.0):
            y = y0 + panel - fraction * panel
            out.append(
                f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{y_max * fraction:.1f}</text>"
            )
        for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
            x = left + fraction * plot_w
            out.append(
                f'<text x="{x:.1f}" y="{y0 + panel + 14}" text-anchor="middle">'
                f"{round(x_max * fraction):,}</text>"
            )
        for offset, (label, colour, points) in enumerate(series):
            shown = " ".join(
                f"{left + n / x_max * plot_w:.1f},{y0 + panel - v / y_max * panel:.1f}"
                for n, v in points
            )
            out.append(
                f'<polyline points="{shown}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            )
            out.append(
                f'<text x="{left + plot_w - 4}" y="{y0 + 14 + 14 * offset}" text-anchor="end" '
                f'fill="{colour}">{_escape(label)}</text>'
            )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">'
        "requests answered</text>"
    )
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000, help="a multiple of 100")
    args = parser.parse_args()
    plan = driver.Plan(sessions=max(1, args.requests // 50), turns=5, steps=10)
    print(f"machine: {machine()}")
    load = load_now()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dsh-soak-") as folder:
        run = asyncio.run(
            driver.soak(Path(folder), plan, every=EVERY, limit_s=LIMIT_S, code_root=code_root())
        )
    wall = time.monotonic() - began
    completed = sum(
        1
        for r in run.requests
        if r.status == 200 and r.finished_at is not None and r.disconnected_at is None
    )
    print(
        f"requests completed: {completed:,} of {plan.requests:,} (exit status {run.code}, "
        f"{len({r.connection for r in run.requests}):,} connections, {wall:.0f} s)"
    )
    if run.code != 0 or completed != plan.requests:
        print(run.stderr[-3000:])
        return 1
    readings = run.readings
    # A shorter trial run (--requests) measures smaller windows, scaled to 1,000.
    step = 1_000 if plan.requests >= 3 * WARM else EVERY
    warm = WARM if plan.requests >= 3 * WARM else plan.requests // 5 // EVERY * EVERY
    rss = per_window(
        readings, step, warm, lambda a, b: (b.rss_kib - a.rss_kib) / 1024 * 1_000 / step
    )
    print(
        figure(
            "resident memory grown per 1,000 requests, after the first 1,000",
            rss,
            target=RSS_TARGET_MB,
            unit="MB",
            load=load,
            extra=f"{readings[-1].rss_kib / 1024:.1f} MB at the end",
        )
    )
    cpu = per_window(
        readings,
        WINDOW,
        WINDOW,
        lambda a, b: (b.cpu_s - a.cpu_s) * 1000 / (b.requests - a.requests),
    )
    print(
        figure(
            "CPU per request, each 500 after the first 500",
            cpu,
            target=CPU_TARGET_MS,
            unit="ms",
            load=load,
        )
    )
    late = [r for r in readings if r.requests >= WINDOW]
    fds = Sample(tuple(float(r.fds) for r in late))
    sockets = Sample(tuple(float(r.sockets) for r in late))
    print(
        figure(
            "open file descriptors, read every 100 requests",
            fds,
            target=FD_TARGET,
            unit="fds",
            digits=0,
            load=load,
            extra=f"max {fds.high:.0f}",
        )
    )
    print(
        figure(
            "open sockets, read every 100 requests",
            sockets,
            target=SOCKET_TARGET,
            unit="sockets",
            digits=0,
            load=load,
            extra=f"max {sockets.high:.0f}",
        )
    )
    windows = itertools.pairwise(readings_at(readings, WINDOW, WINDOW))
    wall_per = statistics.median(
        (b.at_s - a.at_s) * 1000 / (b.requests - a.requests) for a, b in windows
    )
    print(f"wall time per request, for information: {wall_per:.1f} ms (median of the windows)")
    csv, svg = ROOT / "docs" / "soak.csv", ROOT / "docs" / "soak.svg"
    write_csv(csv, readings)
    title = f"dsh --plain through {plan.requests:,} model requests ({machine()})"
    write_svg(svg, readings, title)
    print(f"readings: {csv.relative_to(ROOT)}, plotted in {svg.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
