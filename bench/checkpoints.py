"""Workspace checkpoints (issue 38): what a snapshot of a 10,000-file project costs,
and what an unchanged one stores.

The project is made once, in a temporary directory: 10,000 text files of 1 to 8 KB
(about 45 MB) in 250 folders two levels deep, a ``.gitignore`` and an ignored
``node_modules/`` of 2,000 more files that no checkpoint reads. Each figure drives
``CheckpointStore.snapshot`` (:mod:`dsh.checkpoints.store`), the call the
``checkpoints`` service makes before a step with effects, through the real ``git``.

Targets (the issue):

- the first checkpoint: <= 1.5 s. From opening a store that does not exist yet (a new
  ``$DSH_HOME`` each run) until the tree of every file is written: every file is read
  and stored once.
- a checkpoint when nothing changed since the last (the session's index already
  holds the files): <= 150 ms. git's stat cache: only the stats.
- a checkpoint after a light change (10 files edited, 2 created, 1 deleted): <= 150 ms.
- storage an unchanged checkpoint adds (bytes of the store's objects before and
  after): <= 0 bytes.

``--kills N`` also runs N seeded SIGKILLs of a restore of 460 files in a child
process (the scenario of tests/checkpoints/test_restore_kills.py; the suite runs
20), each followed by the finishing pass, and says how many left the workspace half
restored before that pass: every run must end exactly at the target.

Run: .venv/bin/python bench/checkpoints.py [--kills 100]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from report import figure, load_now, machine, sample_async  # bench/report.py

from dsh.checkpoints.store import CheckpointStore

REPOSITORY = Path(__file__).resolve().parent.parent
FILES = 10_000
FOLDERS = 250
IGNORED = 2_000
FIRST_TARGET = 1.5
AGAIN_TARGET = 0.150


def make_project(root: Path) -> None:
    rng = random.Random(38)
    words = [f"word{n}" for n in range(500)]
    for n in range(FILES):
        folder = root / f"pkg{n % FOLDERS // 25}" / f"mod{n % FOLDERS}"
        folder.mkdir(parents=True, exist_ok=True)
        size = rng.randint(1024, 8192)
        lines = []
        total = 0
        while total < size:
            line = " ".join(rng.choices(words, k=8))
            lines.append(line)
            total += len(line) + 1
        (folder / f"file{n}.py").write_text("\n".join(lines) + "\n")
    (root / ".gitignore").write_text("node_modules/\n*.log\n")
    ignored = root / "node_modules" / "dep"
    ignored.mkdir(parents=True)
    for n in range(IGNORED):
        (ignored / f"i{n}.js").write_text("ignored\n")


def objects_bytes(store: CheckpointStore) -> int:
    return sum(p.stat().st_size for p in (store.folder / "objects").rglob("*") if p.is_file())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=0)
    options = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-checkpoints-") as scratch:
        base = Path(scratch)
        root = base / "project"
        root.mkdir()
        make_project(root)
        homes = iter(range(1000))

        async def first() -> float:
            home = base / f"home{next(homes)}"
            started = time.perf_counter()
            store = await CheckpointStore.open(home, root)
            await store.snapshot("session")
            took = time.perf_counter() - started
            shutil.rmtree(home)
            return took

        load = load_now()
        print(figure(
            f"first checkpoint, {FILES:,} files (a new store)", await sample_async(first),
            target=FIRST_TARGET, load=load,
        ))  # fmt: skip

        home = base / "home"
        store = await CheckpointStore.open(home, root)
        await store.snapshot("session")

        async def unchanged() -> float:
            started = time.perf_counter()
            await store.snapshot("session")
            return time.perf_counter() - started

        load = load_now()
        print(figure(
            f"checkpoint, nothing changed, {FILES:,} files", await sample_async(unchanged),
            target=AGAIN_TARGET * 1000, unit="ms", digits=1, scale=1000, load=load,
        ))  # fmt: skip

        rounds = iter(range(1000))

        async def lightly() -> float:
            n = next(rounds)
            for k in range(10):
                path = next(root.glob(f"pkg*/mod{(n * 10 + k) % FOLDERS}/*.py"))
                with path.open("a") as file:
                    file.write(f"# changed {n}\n")
            for k in range(2):
                (root / "pkg0" / "mod0" / f"new{n}_{k}.py").write_text(f"new {n}\n")
            doomed = next(root.glob(f"pkg*/mod{(n + 100) % FOLDERS}/*.py"))
            doomed.unlink()
            started = time.perf_counter()
            await store.snapshot("session")
            return time.perf_counter() - started

        load = load_now()
        print(figure(
            "checkpoint, 10 files edited, 2 created, 1 deleted", await sample_async(lightly),
            target=AGAIN_TARGET * 1000, unit="ms", digits=1, scale=1000, load=load,
        ))  # fmt: skip

        async def stored() -> float:
            before = objects_bytes(store)
            await store.snapshot("session")
            return float(objects_bytes(store) - before)

        load = load_now()
        print(figure(
            "storage added by an unchanged checkpoint", await sample_async(stored),
            target=0, unit="bytes", digits=0, load=load,
            extra=f"the store holds {objects_bytes(store) / 1e6:,.1f} MB for {FILES:,} files",
        ))  # fmt: skip

    if options.kills:
        sys.path.insert(0, str(REPOSITORY))
        from tests.checkpoints.test_restore_kills import kills

        with tempfile.TemporaryDirectory(prefix="dsh-bench-kills-") as scratch:
            halves = await kills(Path(scratch), options.kills)
        print(
            f"restore killed {options.kills} times (SIGKILL at seeded random moments): every "
            f"run ended exactly at its target after the finishing pass, the conflict "
            f"untouched; {halves} kills landed in the middle of the writes"
        )


if __name__ == "__main__":
    asyncio.run(main())
