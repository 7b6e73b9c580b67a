"""What the sandbox costs (issue 37): a trivial command (``bash -c true``) run bare and
run inside the default sandbox (``workspace-write``, the session's shared loopback),
started the way the bash tool starts it (``Sandbox.wrap``, then
``asyncio.create_subprocess_exec`` with ``launch_options``) and waited for. The
sandbox's own start (finding ``bwrap``, the probe, the network holder) happens once,
before the first command, and is left out: it is the start-up figure below.

Target: wrapping costs at most 15 ms median over running bare. A run takes the median
of 40 commands each way (alternating, after 5 each way to warm up) and their
difference; the figure is the median of 5 runs' differences.

And start-up starts nothing: the runtime is started with the policy on and off (5
times each, alternating), its time to return is shown for both, and the ``bwrap``
processes below this one are counted right after it returns (target: none; the
sandbox starts at its first use). The first ``ready()`` (the probe and the holder,
paid before the first command or once the UI is up) is shown without a target.

Run: .venv/bin/python bench/sandbox.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from report import RUNS, Sample, figure, load_now, machine, tree_pids, verdict

from dsh.processes import child_options
from dsh.runtime import start_runtime
from dsh.sandbox import Policy, Sandbox, launch_options
from dsh.settings_tables import SandboxTable

TARGET = 0.015  # s
COMMANDS, WARM = 40, 5
COMMAND = ["bash", "-c", "true"]


async def bare(cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*COMMAND, cwd=cwd, env=env, **child_options())
    await process.wait()
    return time.perf_counter() - start


async def wrapped(sandbox: Sandbox, cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    inside = await sandbox.wrap(COMMAND, cwd=cwd, env=env)
    process = await asyncio.create_subprocess_exec(
        *inside.argv, cwd=cwd, env=inside.env, **launch_options(inside)
    )
    if await process.wait() != 0:
        raise SystemExit("the sandboxed command failed: is bwrap usable here?")
    return time.perf_counter() - start


async def one_run(root: Path) -> tuple[float, float, float]:
    """Median bare, median wrapped (both in s), and the first ready()."""
    project, home = root / "project", root / "home"
    project.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    env = dict(os.environ)
    sandbox = Sandbox(SandboxTable(), "workspace-write", root=project, home=home)
    try:
        start = time.perf_counter()
        status = await sandbox.ready()
        first_ready = time.perf_counter() - start
        if not status.active:
            raise SystemExit(f"the sandbox cannot start here: {status.reason}")
        bare_times, wrapped_times = [], []
        for n in range(WARM + COMMANDS):
            plain = await bare(project, env)
            inside = await wrapped(sandbox, project, env)
            if n >= WARM:
                bare_times.append(plain)
                wrapped_times.append(inside)
    finally:
        await sandbox.aclose()
    return statistics.median(bare_times), statistics.median(wrapped_times), first_ready


def bwrap_processes() -> int:
    """``bwrap`` processes below this one, now."""
    found = 0
    for pid in tree_pids(os.getpid()):
        try:
            found += Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap"
        except OSError:
            continue
    return found


async def start_up(root: Path, policy: Policy) -> tuple[float, int]:
    """The runtime's time to return, and the ``bwrap`` processes running then."""
    home = root / f"home-{policy}"
    home.mkdir(exist_ok=True)
    start = time.perf_counter()
    runtime = await start_runtime(home=home, cwd=root, sandbox=policy)
    took = time.perf_counter() - start
    try:
        running = bwrap_processes()
    finally:
        await runtime.aclose()
    return took, running


async def main() -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-sandbox-") as folder:
        root = Path(folder)
        load = load_now()
        plain, inside, added, ready = [], [], [], []
        for _ in range(RUNS):
            bare_s, wrapped_s, first_ready = await one_run(root)
            plain.append(bare_s)
            inside.append(wrapped_s)
            added.append(wrapped_s - bare_s)
            ready.append(first_ready)
        print(
            f"bash -c true, bare: {Sample(tuple(plain)).shown('ms', 2, 1000)}); in the "
            f"sandbox: {Sample(tuple(inside)).shown('ms', 2, 1000)})"
        )
        print(
            f"the sandbox's first ready() (probe and network holder, no target): "
            f"{Sample(tuple(ready)).shown('ms', 1, 1000)})"
        )
        print(
            figure(
                f"a command in the sandbox, its cost over running bare (each run the "
                f"difference of the medians of {COMMANDS} commands)",
                Sample(tuple(added)),
                target=TARGET * 1000,
                unit="ms",
                scale=1000,
                load=load,
            )
        )
        load = load_now()
        on, off, seen = [], [], []
        for _ in range(RUNS):
            took, running = await start_up(root, "workspace-write")
            on.append(took)
            seen.append(running)
            took, running = await start_up(root, "off")
            off.append(took)
            seen.append(running)
        print(
            f"runtime start, sandbox workspace-write: {Sample(tuple(on)).shown('ms', 1, 1000)}); "
            f"off: {Sample(tuple(off)).shown('ms', 1, 1000)}) (no target; {load})"
        )
        most = max(seen)
        print(
            f"bwrap processes running once the runtime has started: {most} at most "
            f"({len(seen)} starts; target <= 0 processes: {verdict(most == 0)})"
        )


if __name__ == "__main__":
    asyncio.run(main())
