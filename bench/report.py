"""What every benchmark prints, one way: medians with their ranges, the machine's
load when the figure was taken, and met or MISSED per target.

A figure is the median of at least :data:`RUNS` runs, with the fastest and slowest
beside it; the verdict is the median's. Before each figure the load is sampled (the
1-minute load average and how busy the CPUs were over the last half second), so a
figure taken on a busy machine says so. A figure line reads::

    launch to ready: 0.31 s median (0.28 to 0.35, 5 runs; load 0.4, cpu 3%; target <= 0.5 s: met)

``bench/run`` collects every ``target ...: met|MISSED`` line into the summary table.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

RUNS = 5
"""Runs behind every figure, at least."""
PACKAGES = ("textual", "pydantic", "httpx", "rich")


def code_root() -> Path:
    """The tree whose dsh is measured: this one, or the one ``bench/run --against``
    names in ``DSH_BENCH_CODE`` (also first on ``PYTHONPATH`` then)."""
    here = Path(__file__).resolve().parent.parent
    return Path(os.environ.get("DSH_BENCH_CODE") or here)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


@dataclass(frozen=True)
class Sample:
    """The values of one figure's runs."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def shown(self, unit: str = "s", digits: int = 2, scale: float = 1.0) -> str:
        """``0.31 s median (0.28 to 0.35, 5 runs``: the caller closes the bracket."""
        m, lo, hi = (v * scale for v in (self.median, self.low, self.high))
        return (
            f"{m:,.{digits}f} {unit} median ({lo:,.{digits}f} to {hi:,.{digits}f}, "
            f"{len(self.values)} runs"
        )


def sample(measure: Callable[[], float], runs: int = RUNS) -> Sample:
    return Sample(tuple(measure() for _ in range(runs)))


async def sample_async(measure: Callable[[], Awaitable[float]], runs: int = RUNS) -> Sample:
    return Sample(tuple([await measure() for _ in range(runs)]))


def figure(
    label: str,
    taken: Sample,
    *,
    target: float,
    unit: str = "s",
    digits: int = 2,
    scale: float = 1.0,
    at_least: bool = False,
    load: str | None = None,
    extra: str = "",
) -> str:
    """One figure's line: the median (the verdict's), range, load and target.
    ``scale`` converts the samples to ``unit`` (1000 for seconds shown in ms);
    ``at_least`` for throughputs; ``load`` as sampled before the runs (now if None)."""
    shown_target = f"{target:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{target:,.0f}"
    ok = taken.median * scale >= target if at_least else taken.median * scale <= target
    sign = ">=" if at_least else "<="
    line = (
        f"{label}: {taken.shown(unit, digits, scale)}; {load or load_now()}; "
        f"target {sign} {shown_target} {unit}: {verdict(ok)})"
    )
    return line + (f"; {extra}" if extra else "")


def load_now(window: float = 0.5) -> str:
    """``load 0.42, cpu 7%``: the 1-minute load average, and the share of all CPUs
    busy over the last ``window`` seconds (this process's own sleep included)."""
    try:
        one_minute = Path("/proc/loadavg").read_text().split()[0]
        busy_before, total_before = _cpu_times()
        time.sleep(window)
        busy_after, total_after = _cpu_times()
    except (OSError, IndexError, ValueError):
        return "load unknown"
    total = total_after - total_before
    busy = (busy_after - busy_before) / total if total else 0.0
    return f"load {float(one_minute):.2f}, cpu {busy:.0%}"


def _cpu_times() -> tuple[int, int]:
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def machine() -> str:
    """CPU model, cores, OS and Python, for the results table."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}"
    )


def versions() -> str:
    """``Python 3.11.7, textual 6.2.1, pydantic 2.12.3, ...``: what the figures ran on."""
    found = [f"Python {platform.python_version()}"]
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def tree_pids(pid: int) -> list[int]:
    """``pid`` and every process below it, now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # the field after the parenthesised name, which may itself hold spaces
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB."""
    total = 0
    for member in tree_pids(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants
    (and the children they have waited for)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for member in tree_pids(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{member}/stat").read_text().rpartition(")")[2].split()
            # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name
            total += sum(int(v) for v in fields[11:15])
    return total / tick
