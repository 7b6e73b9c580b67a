"""A restore killed at any moment (SIGKILL, seeded random times) and finished by a
later pass always ends exactly at its target, and never touches a file changed by
hand. ``bench/checkpoints.py --kills 100`` runs more of them."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

from dsh.checkpoints.restore import apply_restore, plan_restore
from dsh.checkpoints.store import CheckpointStore, Snapshot
from dsh.session import CheckpointTaken, RestoreStarted
from tests.support.waits import HANG_S

REPO = Path(__file__).resolve().parents[2]
FILES = 400


def state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file (and link) under ``root``: its bytes (a link's target) and mode."""
    found: dict[str, tuple[bytes, int]] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = Path(folder, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[str(path.relative_to(root))] = (os.fsencode(os.readlink(path)), 0o120000)
            else:
                found[str(path.relative_to(root))] = (path.read_bytes(), info.st_mode & 0o7777)
    return found


def checkpoint(snapshot: Snapshot, name: str) -> CheckpointTaken:
    return CheckpointTaken(
        checkpoint_id=name, phase="before-step", turn=1, step=1, root="/",
        tree=snapshot.tree, modes=snapshot.modes, left_out=snapshot.left_out,
    )  # fmt: skip


async def scenario(
    tmp_path: Path, seed: int
) -> tuple[CheckpointStore, RestoreStarted, str, dict[str, tuple[bytes, int]]]:
    """A project, its target checkpoint, a turn that changed most of it, a file changed
    by hand since: the restore's plan and what the workspace must end as."""
    rng = random.Random(seed)
    root = tmp_path / "project"
    for n in range(FILES):
        path = root / f"d{n % 7}" / f"sub{n % 3}" / f"f{n}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.randint(0, 3000)))
    (root / "d0" / "tool.sh").write_bytes(b"#!/bin/sh\n")
    (root / "d0" / "tool.sh").chmod(0o755)
    (root / "d1" / "private").write_bytes(b"p\n")
    (root / "d1" / "private").chmod(0o600)
    (root / "link").symlink_to("d0/tool.sh")
    (root / "hand.txt").write_bytes(b"before\n")
    store = await CheckpointStore.open(tmp_path / "home", root)
    target = await store.snapshot("s")
    expected_state = state(root)
    # The turn: changes, deletions (a whole folder too), creations, a mode, a link.
    for n in range(FILES):
        path = root / f"d{n % 7}" / f"sub{n % 3}" / f"f{n}.txt"
        match n % 4:
            case 0:
                path.write_bytes(b"changed by the turn %d\n" % n)
            case 1:
                path.unlink()
            case 2:
                pass
            case _:
                path.chmod(0o700)
    for n in range(60):
        made = root / "new" / f"deep{n % 5}" / f"n{n}.bin"
        made.parent.mkdir(parents=True, exist_ok=True)
        made.write_bytes(rng.randbytes(500))
    (root / "link").unlink()
    (root / "link").symlink_to("elsewhere")
    (root / "d1" / "private").chmod(0o644)
    (root / "hand.txt").write_bytes(b"by the turn\n")
    end = await store.snapshot("s")
    (root / "hand.txt").write_bytes(b"by hand, later\n")  # the conflict
    current = await store.snapshot("s")
    plan = await plan_restore(
        store,
        purpose="undo",
        turn=1,
        target=checkpoint(target, "t"),
        expected=checkpoint(end, "e"),
        current=checkpoint(current, "c"),
    )
    assert plan.conflicts == ("hand.txt",)
    started = RestoreStarted(
        restore_id=f"restore{seed}", purpose="undo", turn=1, target="t",
        writes=plan.writes, conflicts=plan.conflicts,
    )  # fmt: skip
    expected_state["hand.txt"] = (b"by hand, later\n", 0o644)
    return store, started, target.tree, expected_state


async def kill_while_applying(
    store: CheckpointStore,
    started: RestoreStarted,
    tree: str,
    wanted: dict[str, tuple[bytes, int]],
    seed: int,
) -> bool:
    """One run: apply in a child killed after a seeded delay, then finish here. True
    when the kill left the workspace half restored."""
    restore = store.folder.parent / "restore.json"
    restore.write_text(started.model_dump_json())
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.checkpoints.apply_worker", str(store.folder.parents[1]),
        str(store.root), str(restore), tree,
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stdin is not None
    try:
        ready = await asyncio.wait_for(child.stdout.readline(), HANG_S)
        assert ready == b"ready\n"
        child.stdin.write(b"go\n")
        await child.stdin.drain()
        await asyncio.sleep(random.Random(seed).uniform(0, 0.1))
    finally:
        if child.returncode is None:
            child.send_signal(signal.SIGKILL)
        await asyncio.wait_for(child.wait(), HANG_S)
    half = state(store.root) != wanted
    done = await apply_restore(store, started, tree)  # the finishing pass
    assert done.conflicts == ()  # the plan's conflict was never a write
    assert state(store.root) == wanted
    assert list(store.root.rglob("*dsh-restore*")) == []
    return half


async def kills(tmp_path: Path, runs: int) -> int:
    """``runs`` kills of one restore, each from the same workspace; how many left it
    half restored (the rest landed before the first write or after the last)."""
    store, started, tree, wanted = await scenario(tmp_path, 7)
    pristine = tmp_path / "pristine"
    shutil.copytree(store.root, pristine, symlinks=True)
    halves = 0
    for seed in range(runs):
        shutil.rmtree(store.root)
        shutil.copytree(pristine, store.root, symlinks=True)
        halves += await kill_while_applying(store, started, tree, wanted, seed)
    return halves


async def test_a_restore_killed_at_random_moments_always_finishes_at_its_target(
    tmp_path: Path,
) -> None:
    await kills(tmp_path, 20)


async def test_applying_twice_changes_nothing_more(tmp_path: Path) -> None:
    store, started, tree, wanted = await scenario(tmp_path, 99)
    first = await apply_restore(store, started, tree)
    assert state(store.root) == wanted
    again = await apply_restore(store, started, tree)
    assert state(store.root) == wanted
    assert sorted(again.applied) == sorted(first.applied)
    # Folders the turn made are gone; the target's stay.
    assert not (store.root / "new").exists()
    assert (store.root / "d0" / "sub0").is_dir()
