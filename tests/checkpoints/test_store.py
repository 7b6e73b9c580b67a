"""The private object store on real files and the real git binary: bytes exact,
modes, symlinks, ignored files, size limits, and the project's own .git untouched."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from dsh.checkpoints.restore import apply_restore, plan_restore
from dsh.checkpoints.store import (
    ABSENT,
    BULK_FILES,
    LINK_MODE,
    CheckpointError,
    CheckpointStore,
    Snapshot,
    blob_id,
    store_folder,
)
from dsh.session import CheckpointTaken, RestoreStarted

MB = 1024 * 1024


def git(root: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its content's digest (and each link's target)."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(folder))] = "-> " + os.readlink(path)
        elif path.is_file():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def objects(store: CheckpointStore) -> set[str]:
    return {str(p) for p in (store.folder / "objects").rglob("*") if p.is_file()}


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A project that is a git repository, with a commit, a stash and a branch."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "T")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / ".gitattributes").write_text("* text=auto eol=crlf\n*.bin filter=lfs diff=lfs\n")
    (root / "unix.txt").write_bytes(b"a\nb\n")
    (root / "dos.txt").write_bytes(b"a\r\nb\r\n")
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "unix.txt").write_bytes(b"a\nb\nc\n")
    git(root, "stash", "-q")
    git(root, "branch", "side")
    # A filter the project's own git would run: the store must not.
    git(root, "config", "filter.lfs.clean", f"touch {root.parent / 'filter-ran'}; cat")
    git(root, "config", "core.fsmonitor", f"touch {root.parent / 'fsmonitor-ran'}; false")
    (root / "untracked.txt").write_bytes(b"not added\n")
    (root / "debug.log").write_bytes(b"ignored\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"ignored too\n")
    (root / "tool.sh").write_bytes(b"#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)
    (root / "key.pem").write_bytes(b"private\n")
    (root / "key.pem").chmod(0o600)
    (root / "link").symlink_to("dos.txt")
    (root / "dangling").symlink_to("nowhere/at/all")
    return root


async def test_bytes_modes_links_and_ignores(repository: Path, tmp_path: Path) -> None:
    store = await CheckpointStore.open(tmp_path / "home", repository)
    snapshot = await store.snapshot("s1")
    entries = await store.entries(snapshot.tree)
    assert set(entries) == {
        ".gitattributes", ".gitignore", "unix.txt", "dos.txt", "data.bin",
        "untracked.txt", "tool.sh", "key.pem", "link", "dangling",
    }  # fmt: skip
    for name in ("unix.txt", "dos.txt", "data.bin", "untracked.txt", "tool.sh", "key.pem"):
        data = (repository / name).read_bytes()
        assert await store.read_blob(entries[name].blob) == data, name
        assert entries[name].blob == blob_id(data)
    # CRLF stays CRLF, LF stays LF, and the "lfs" filter ran nowhere.
    assert await store.read_blob(entries["dos.txt"].blob) == b"a\r\nb\r\n"
    assert entries["link"].mode == LINK_MODE
    assert await store.read_blob(entries["link"].blob) == b"dos.txt"
    assert await store.read_blob(entries["dangling"].blob) == b"nowhere/at/all"
    assert entries["tool.sh"].mode == 0o100755
    assert snapshot.modes == {"key.pem": 0o600}
    assert snapshot.left_out == ()
    assert not (tmp_path / "filter-ran").exists()
    assert not (tmp_path / "fsmonitor-ran").exists()
    hashed = await store.hash_files(["dos.txt", "link", "gone.txt", "data.bin"])
    assert hashed == {
        "dos.txt": entries["dos.txt"].blob,
        "link": entries["link"].blob,
        "gone.txt": ABSENT,
        "data.bin": entries["data.bin"].blob,
    }


async def test_the_projects_git_is_never_touched(repository: Path, tmp_path: Path) -> None:
    status = git(repository, "status", "--porcelain")  # may refresh the index: first
    before = fingerprint(repository / ".git")
    store = await CheckpointStore.open(tmp_path / "home", repository)
    first = await store.snapshot("s1")
    taken = [first]
    for round_ in range(5):
        (repository / "untracked.txt").write_bytes(b"round %d\n" % round_)
        (repository / f"new{round_}.txt").write_bytes(b"x")
        taken.append(await store.snapshot("s1"))
        taken.append(await store.snapshot("s2"))
    changes = await store.diff(first.tree, taken[-1].tree)
    assert {c.path for c in changes} == {"untracked.txt", *(f"new{n}.txt" for n in range(5))}
    # ...and a restore back to the first snapshot.
    target, expected = checkpoint(first), checkpoint(taken[-1])
    plan = await plan_restore(
        store, purpose="undo", turn=1, target=target, expected=expected, current=expected
    )
    started = RestoreStarted(
        restore_id="r1", purpose="undo", turn=1, target="t", writes=plan.writes
    )
    done = await apply_restore(store, started, first.tree)
    assert len(done.applied) == 6
    assert not done.conflicts
    assert not (repository / "new0.txt").exists()
    assert (repository / "untracked.txt").read_bytes() == b"not added\n"
    assert fingerprint(repository / ".git") == before
    assert git(repository, "stash", "list").count("\n") == 1
    assert git(repository, "status", "--porcelain") == status


def checkpoint(snapshot: Snapshot) -> CheckpointTaken:
    return CheckpointTaken(
        checkpoint_id=snapshot.tree, phase="before-step", turn=1, step=1, root="/",
        tree=snapshot.tree, modes=snapshot.modes,
    )  # fmt: skip


async def test_an_unchanged_tree_adds_no_objects(repository: Path, tmp_path: Path) -> None:
    for n in range(BULK_FILES + 10):  # enough that a new index stores them in bulk
        (repository / "many" / f"{n}.txt").parent.mkdir(exist_ok=True)
        (repository / "many" / f"{n}.txt").write_bytes(b"%d\n" % n)
    store = await CheckpointStore.open(tmp_path / "home", repository)
    first = await store.snapshot("s1")
    stored = objects(store)
    again = await store.snapshot("s1")
    assert again.tree == first.tree
    assert again.new_bytes == 0
    assert objects(store) == stored
    other = await store.snapshot("s2")  # another session's index: same objects, none new
    assert other.tree == first.tree
    assert objects(store) == stored


async def test_too_large_files_are_left_out_and_named(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "small.txt").write_bytes(b"s" * 100)
    (root / "big.dat").write_bytes(b"b" * (2 * MB))
    for n in range(3):
        (root / f"medium{n}.dat").write_bytes(bytes([n]) * (MB // 2))
    store = await CheckpointStore.open(tmp_path / "home", root)
    snapshot = await store.snapshot("s1", max_file_bytes=MB, max_checkpoint_bytes=MB + 200)
    left = {(item.path, item.reason) for item in snapshot.left_out}
    assert ("big.dat", "file-too-large") in left
    # 1 MB of budget: the small file and two of the medium ones fit, the third does not.
    assert sum(1 for _, reason in left if reason == "checkpoint-too-large") == 1
    entries = await store.entries(snapshot.tree)
    assert "small.txt" in entries
    assert "big.dat" not in entries
    assert len([name for name in entries if name.startswith("medium")]) == 2
    # A file that grows past the limit leaves the next checkpoint (its old bytes are
    # not passed off as its content).
    (root / "small.txt").write_bytes(b"s" * (2 * MB))
    grown = await store.snapshot("s1", max_file_bytes=MB, max_checkpoint_bytes=10 * MB)
    assert "small.txt" not in await store.entries(grown.tree)
    assert ("small.txt", "file-too-large") in {(i.path, i.reason) for i in grown.left_out}


async def test_git_failures_are_one_error_type(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    store = await CheckpointStore.open(tmp_path / "home", root)
    with pytest.raises(CheckpointError, match="cat-file"):
        await store.read_blob("0" * 40)
    assert store_folder(tmp_path / "home", root) == store.folder
    assert store.folder.parent == tmp_path / "home" / "checkpoints"
    assert not (store.folder / "hooks").exists()  # no template copied, no sample hook
