"""Putting the workspace back: what the log says about checkpoints, the plan of a
restore, and applying it so that a kill at any moment loses nothing.

Planning compares three states of every path: the target T (the first checkpoint of
the chosen turn: the files as they were before it), the expected state E (the latest
the agent knows: a turn's end, a step's start or a finished restore's target) and the
current state C (a snapshot taken now). A path where E and T differ is written back
to T when C still equals E; one where C differs from both was changed by hand since:
a conflict, left alone. A path changed by hand that the restore does not touch is
*kept*.

Applying is a list of steps, each idempotent: a file already at the target is
skipped, one that holds what was expected is replaced (a temporary file in the same
folder, its mode set, renamed over), one that holds anything else is a conflict and
left alone. ``checkpoint/restoring`` names every step before any file is touched, so
a later process finishes a restore a kill cut short by applying it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dsh.checkpoints.store import (
    ABSENT,
    LINK_MODE,
    CheckpointStore,
    Entry,
    LineCount,
    current_blob,
    restored_mode,
)
from dsh.session.checkpoint_events import (
    CheckpointTaken,
    FileWrite,
    PathChange,
    RestoreDone,
    RestoreStarted,
)
from dsh.session.events import SessionEvent

__all__ = [
    "Applied",
    "FileSummary",
    "Purpose",
    "RestoreOutcome",
    "RestorePlan",
    "TurnCheckpoint",
    "TurnCheckpoints",
    "apply_writes",
    "plan_restore",
    "read_history",
]

Purpose = Literal["undo", "rewind", "fork"]


@dataclass(frozen=True)
class FileSummary:
    """One line of the summary shown before a restore."""

    path: str
    action: Literal["restore", "remove", "recreate", "mode"]
    added_lines: int = 0
    """Lines the restore puts back (0 for a binary file)."""
    removed_lines: int = 0
    """Lines the restore takes out."""
    binary: bool = False


@dataclass(frozen=True)
class RestorePlan:
    purpose: Purpose
    turn: int
    """The workspace goes back to before this turn."""
    target: str
    """The checkpoint restored to."""
    writes: tuple[FileWrite, ...] = ()
    conflicts: tuple[str, ...] = ()
    """Files changed by hand since the agent's last known state, which the restore
    would otherwise change: left alone."""
    kept: tuple[str, ...] = ()
    """Files changed by hand that the restore does not touch."""
    left_out: tuple[str, ...] = ()
    """Files the checkpoints did not hold (too large): not restored."""
    summary: tuple[FileSummary, ...] = ()

    def empty(self) -> bool:
        """Nothing to write (there may still be conflicts to show)."""
        return not self.writes


@dataclass(frozen=True)
class RestoreOutcome:
    restore_id: str
    applied: tuple[str, ...]
    conflicts: tuple[str, ...]
    resumed: bool = False


@dataclass(frozen=True)
class TurnCheckpoint:
    """A turn that took checkpoints: its first (the files before it), its end."""

    turn: int
    first: CheckpointTaken
    end: CheckpointTaken | None = None
    undone: bool = False
    """A finished restore has put the files back to before this turn (or an earlier one)."""

    @property
    def changes(self) -> tuple[PathChange, ...]:
        """What the turn changed (at most :data:`MAX_CHANGES`; see ``changes_total``)."""
        return self.end.changes if self.end else ()

    @property
    def changes_total(self) -> int:
        return self.end.changes_total if self.end else 0


@dataclass(frozen=True)
class TurnCheckpoints:
    """What a session's log says of its checkpoints."""

    turns: tuple[TurnCheckpoint, ...] = ()
    """Oldest first: the turns whose first checkpoint was taken."""
    checkpoints: Mapping[str, CheckpointTaken] = field(default_factory=dict)
    """Every checkpoint taken, by id."""
    expected: CheckpointTaken | None = None
    """The latest state of the files the agent knows (E)."""
    pending: RestoreStarted | None = None
    """A restore begun and never finished (its process was stopped)."""

    def turn(self, number: int) -> TurnCheckpoint | None:
        return next((t for t in self.turns if t.turn == number), None)

    def undoable(self) -> TurnCheckpoint | None:
        """The latest turn with effects that no finished restore has undone."""
        return next((t for t in reversed(self.turns) if not t.undone), None)

    def before(self, number: int) -> TurnCheckpoint | None:
        """The first turn from ``number`` on that took a checkpoint: its first one holds
        the files as they were before turn ``number``."""
        return next((t for t in self.turns if t.turn >= number), None)


HISTORY_TYPES = ("checkpoint/taken", "checkpoint/restoring", "checkpoint/restored")
"""The event types :func:`read_history` reads (what to scan a long log for)."""


def read_history(events: Iterable[SessionEvent]) -> TurnCheckpoints:
    """The checkpoints of a log, oldest first."""
    by_id: dict[str, CheckpointTaken] = {}
    firsts: dict[int, CheckpointTaken] = {}
    ends: dict[int, CheckpointTaken] = {}
    undone: set[int] = set()
    order: list[int] = []
    expected: CheckpointTaken | None = None
    started: dict[str, RestoreStarted] = {}
    for event in events:
        data = event.data
        if isinstance(data, CheckpointTaken):
            by_id[data.checkpoint_id] = data
            if data.tree is None:
                continue
            if data.phase != "before-restore":
                expected = data
            if data.turn is None:
                continue
            if data.phase == "before-step" and data.turn not in firsts:
                firsts[data.turn] = data
                order.append(data.turn)
            elif data.phase == "turn-end":
                ends[data.turn] = data
        elif isinstance(data, RestoreStarted):
            started[data.restore_id] = data
        elif isinstance(data, RestoreDone):
            begun = started.pop(data.restore_id, None)
            if begun is None or data.error is not None:
                continue
            target = by_id.get(begun.target)
            if target is not None:
                expected = target
            undone.update(turn for turn in order if turn >= begun.turn)
    turns = tuple(
        TurnCheckpoint(turn, firsts[turn], ends.get(turn), undone=turn in undone) for turn in order
    )
    pending = next(reversed(started.values()), None) if started else None
    return TurnCheckpoints(turns, by_id, expected, pending)


def _effective(entry: Entry | None, modes: Mapping[str, int], path: str) -> tuple[str, int] | None:
    """A path's content and whole mode in a checkpoint (None: absent)."""
    if entry is None:
        return None
    return entry.blob, restored_mode(entry, modes, path)


async def plan_restore(
    store: CheckpointStore,
    *,
    purpose: Purpose,
    turn: int,
    target: CheckpointTaken,
    expected: CheckpointTaken,
    current: CheckpointTaken,
    left_out: Iterable[str] = (),
) -> RestorePlan:
    """What restoring ``target`` would do (E = ``expected``, C = ``current``)."""
    assert target.tree is not None
    assert expected.tree is not None
    assert current.tree is not None
    e_to_t = {change.path: change for change in await store.diff(expected.tree, target.tree)}
    e_to_c = {change.path: change for change in await store.diff(expected.tree, current.tree)}
    e_entries: dict[str, Entry | None] = {p: c.old for p, c in e_to_t.items()}
    t_entries: dict[str, Entry | None] = {p: c.new for p, c in e_to_t.items()}
    # Paths whose permission bits alone differ between E and T: the same entry in both.
    mode_only = (set(expected.modes) | set(target.modes)) - set(e_to_t)
    if mode_only:
        target_entries = await store.entries(target.tree)
        for path in mode_only:
            entry = target_entries.get(path)
            if entry is None or expected.modes.get(path) == target.modes.get(path):
                continue
            e_entries[path] = t_entries[path] = entry
    unknown = {item.path for item in current.left_out}
    writes: list[FileWrite] = []
    conflicts: list[str] = []
    summary: list[FileSummary] = []
    counts = await store.line_counts(expected.tree, target.tree)
    for path in sorted(e_entries):
        e = _effective(e_entries[path], expected.modes, path)
        t = _effective(t_entries[path], target.modes, path)
        if e == t:
            continue
        change = e_to_c.get(path)
        c_entry = change.new if change is not None else e_entries[path]
        c = _effective(c_entry, current.modes, path)
        if path in unknown:
            conflicts.append(path)
        elif c == t:
            continue  # already as it was
        elif c != e:
            conflicts.append(path)
        else:
            blob, mode = t if t is not None else (None, None)
            writes.append(
                FileWrite(path=path, blob=blob, mode=mode, expect=e[0] if e is not None else None)
            )
            summary.append(_summary_line(path, e, t, counts))
    touched = set(e_entries)
    kept = sorted(p for p in e_to_c if p not in touched)
    kept.extend(
        p
        for p in sorted(set(expected.modes) ^ set(current.modes))
        if p not in touched and p not in e_to_c
    )
    return RestorePlan(
        purpose=purpose,
        turn=turn,
        target=target.checkpoint_id,
        writes=tuple(writes),
        conflicts=tuple(conflicts),
        kept=tuple(kept),
        left_out=tuple(sorted(set(left_out))),
        summary=tuple(summary),
    )


def _summary_line(
    path: str,
    e: tuple[str, int] | None,
    t: tuple[str, int] | None,
    counts: Mapping[str, LineCount],
) -> FileSummary:
    count = counts.get(path)
    added = removed = 0
    binary = False
    if count is not None:
        # diff-tree ran from E to T: what it adds is what the restore puts back.
        added, removed, binary = count.added, count.removed, count.binary
    if t is None:
        return FileSummary(path, "remove", added, removed, binary)
    if e is None:
        return FileSummary(path, "recreate", added, removed, binary)
    if e[0] == t[0]:
        return FileSummary(path, "mode")
    return FileSummary(path, "restore", added, removed, binary)


# ---------------------------------------------------------------------- applying


@dataclass(frozen=True)
class Applied:
    applied: tuple[str, ...]
    conflicts: tuple[str, ...]


def temporary_name(path: Path, restore_id: str) -> Path:
    """Where a step writes before renaming: beside the file, named for the restore, so
    a later pass finds what a killed one left."""
    return path.with_name(f".{path.name}.dsh-restore-{restore_id[:12]}")


async def apply_restore(
    store: CheckpointStore, started: RestoreStarted, target_tree: str
) -> Applied:
    """Apply ``started``'s writes to the store's project (again, if a pass was cut short)."""
    blobs = await store.read_blobs(w.blob for w in started.writes if w.blob is not None)
    folders = await store.folders(target_tree)
    return await asyncio.to_thread(
        apply_writes, store.root, started.restore_id, started.writes, blobs, folders
    )


def apply_writes(
    root: Path,
    restore_id: str,
    writes: Sequence[FileWrite],
    blobs: Mapping[str, bytes],
    keep_folders: set[str],
) -> Applied:
    """The steps of a restore, each idempotent (blocking: run it in a thread).
    Removals first, deepest first, then writes, shallowest first (a file may take the
    place of a folder the restore empties, or the other way round); then folders left
    empty that the target does not hold are removed."""
    applied: list[str] = []
    conflicts: list[str] = []
    removals = sorted((w for w in writes if w.blob is None), key=lambda w: -w.path.count("/"))
    puts = sorted((w for w in writes if w.blob is not None), key=lambda w: w.path.count("/"))
    emptied: set[str] = set()
    for write in removals:
        path = root / write.path
        now, _ = current_blob(path)
        if now == ABSENT:
            applied.append(write.path)
        elif now == write.expect:
            path.unlink()
            applied.append(write.path)
        else:
            conflicts.append(write.path)
            continue
        parent = os.path.dirname(write.path)
        while parent:
            emptied.add(parent)
            parent = os.path.dirname(parent)
    for folder in sorted(emptied, key=lambda f: -f.count("/")):
        if folder not in keep_folders:
            with contextlib.suppress(OSError):  # not empty, or gone: left as it is
                (root / folder).rmdir()
    for write in puts:
        assert write.blob is not None
        assert write.mode is not None
        path = root / write.path
        temporary = temporary_name(path, restore_id)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            temporary.unlink()
        now, mode = current_blob(path)
        if now == write.blob:
            if not stat.S_ISLNK(write.mode) and mode & 0o7777 != write.mode & 0o7777:
                path.chmod(write.mode & 0o7777)
            applied.append(write.path)
            continue
        if now != (write.expect or ABSENT):
            conflicts.append(write.path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        data = blobs[write.blob]
        if write.mode == LINK_MODE:
            os.symlink(os.fsdecode(data), temporary)
        else:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _write_all(descriptor, data)
                os.fchmod(descriptor, write.mode & 0o7777)
            finally:
                os.close(descriptor)
        os.replace(temporary, path)
        applied.append(write.path)
    return Applied(tuple(applied), tuple(conflicts))


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]
