"""The terminal input fuzzer, many seeds: :mod:`tests.e2e.input_fuzz` (the real
``dsh`` in tmux, random keys, bursts, early input and pastes, checked against a
reference editor) over seeds 1..N in parallel processes.

Target: 0 differences (the sent messages and the prompt box equal the editor's in
every case). A failing seed prints with what differed; keep it as a named case in
tests/e2e/test_input_fuzz.py.

Each process types a chunk of cases (20) into one dsh, one after the other, the first
with its early keys; a case that differs ends that dsh, and the rest of its chunk goes
on in a new one.

Run: .venv/bin/python bench/input_fuzz.py [--cases 2000] [--jobs 2] [--first 1] [--chunk 20]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_chunk(seeds: list[int]) -> list[tuple[int, str]]:
    """The cases of ``seeds`` typed into one dsh (a new one after a difference, with
    the seeds after the one that differed); the seeds that differed, and how."""
    from tests.e2e.input_fuzz import Difference, generate, run_cases

    failed: list[tuple[int, str]] = []
    while seeds:
        cases = [generate(seed) for seed in seeds]
        with tempfile.TemporaryDirectory(prefix="dsh-fuzz-") as root:
            try:
                asyncio.run(run_cases(cases, Path(root), limit=60.0))
                return failed
            except Difference as difference:
                text = str(difference)
            except Exception as error:  # a crash of the harness counts as a difference too
                text = f"seed {seeds[0]}: {type(error).__name__}: {error}"
        match = re.match(r"seed (\d+):", text)
        seed = int(match[1]) if match else seeds[0]
        failed.append((seed, text[:3000]))
        seeds = seeds[seeds.index(seed) + 1 :] if seed in seeds else []
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 2))
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=20, help="cases typed into one dsh")
    args = parser.parse_args()
    seeds = range(args.first, args.first + args.cases)
    chunks = [list(seeds[i : i + args.chunk]) for i in range(0, len(seeds), args.chunk)]
    started = time.monotonic()
    failed: list[tuple[int, str]] = []
    done = 0
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for chunk, differences in zip(chunks, pool.map(run_chunk, chunks), strict=True):
            done += len(chunk)
            for seed, difference in differences:
                failed.append((seed, difference))
                print(f"seed {seed}: {difference}", flush=True)
            print(f"{done} cases, {len(failed)} differences", flush=True)
    elapsed = time.monotonic() - started
    print(f"input fuzzer: {done} cases (seeds {seeds.start}-{seeds.stop - 1}), {args.jobs} jobs")
    print(f"input fuzzer wall time: {elapsed:.0f} s ({elapsed / max(done, 1):.2f} s a case)")
    verdict = "met" if not failed else "MISSED"
    print(f"input fuzzer differences: {len(failed)} (target <= 0 differences: {verdict})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
