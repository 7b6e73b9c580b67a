"""The terminal input fuzzer, many seeds: :mod:`tests.e2e.input_fuzz` (the real
``dsh`` in tmux, random keys, bursts, early input and pastes, checked against a
reference editor) over seeds 1..N in parallel processes.

Target: 0 differences (the sent messages and the prompt box equal the editor's in
every case). 2,000 cases take about half an hour on 2 cores. A failing seed prints with what differed; keep it as a named case in
tests/e2e/test_input_fuzz.py.

Run: .venv/bin/python bench/input_fuzz.py [--cases 2000] [--jobs 2] [--first 1]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_seed(seed: int) -> tuple[int, str | None]:
    from tests.e2e.input_fuzz import generate, run_case

    with tempfile.TemporaryDirectory(prefix="dsh-fuzz-") as root:
        try:
            asyncio.run(run_case(generate(seed), Path(root), limit=60.0))
        except AssertionError as difference:
            return seed, str(difference)[:3000]
        except Exception as error:  # a crash of the harness counts as a difference too
            return seed, f"{type(error).__name__}: {error}"
    return seed, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 2))
    parser.add_argument("--first", type=int, default=1)
    args = parser.parse_args()
    seeds = range(args.first, args.first + args.cases)
    started = time.monotonic()
    failed: list[tuple[int, str]] = []
    done = 0
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for seed, difference in pool.map(run_seed, seeds):
            done += 1
            if difference is not None:
                failed.append((seed, difference))
                print(f"seed {seed}: {difference}", flush=True)
            if done % 100 == 0:
                print(f"{done} cases, {len(failed)} differences", flush=True)
    elapsed = time.monotonic() - started
    print(f"input fuzzer: {done} cases (seeds {seeds.start}-{seeds.stop - 1}), {args.jobs} jobs")
    print(f"input fuzzer wall time: {elapsed:.0f} s ({elapsed / max(done, 1):.2f} s a case)")
    verdict = "met" if not failed else "MISSED"
    print(f"input fuzzer differences: {len(failed)} (target <= 0 differences: {verdict})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
