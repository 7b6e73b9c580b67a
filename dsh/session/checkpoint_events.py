"""The events of workspace checkpoints (:mod:`dsh.checkpoints`): a snapshot taken, a
restore begun, a restore done.

They are core types, registered when :mod:`dsh.session` is imported, so a log's
checkpoints read the same in every process (``dsh sessions show``, a resume), and the
restore that a kill interrupted can be found and finished from the log alone:
``checkpoint/restoring`` names every write before any file is touched.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from dsh.session.events import _core_event
from dsh.wire import Frozen

__all__ = [
    "MAX_CHANGES",
    "CheckpointTaken",
    "FileWrite",
    "LeftOut",
    "PathChange",
    "RestoreDone",
    "RestoreStarted",
]

MAX_CHANGES = 500
"""The most changes a turn-end checkpoint lists (``changes_total`` counts them all)."""


class LeftOut(Frozen):
    """A file a checkpoint does not hold, and why."""

    path: str
    size: int
    reason: Literal["file-too-large", "checkpoint-too-large"]


class PathChange(Frozen):
    path: str
    change: Literal["added", "modified", "deleted", "mode"]


class CheckpointTaken(Frozen):
    """A snapshot of the project's files (``tree``, a git tree id in the private store,
    plus the permission bits git cannot carry in ``modes``)."""

    checkpoint_id: str
    phase: Literal["before-step", "turn-end", "before-restore"]
    turn: PositiveInt | None = None
    step: PositiveInt | None = None
    root: str
    """The project root it covers."""
    tree: str | None = None
    """None: not taken (``error`` says why)."""
    modes: dict[str, int] = Field(default_factory=dict)
    """Path -> ``st_mode & 0o7777`` for each file whose bits git would not restore
    (anything but 0o644, or 0o755 for an executable)."""
    left_out: tuple[LeftOut, ...] = ()
    same_as: str | None = None
    """The earlier checkpoint of this session that holds the same files (the snapshot
    added nothing to storage)."""
    changes: tuple[PathChange, ...] = ()
    """Turn-end only: what the turn changed (its first checkpoint -> its end), at most
    :data:`MAX_CHANGES`."""
    changes_total: int = 0
    error: str | None = None


class FileWrite(Frozen):
    """One step of a restore: put ``blob`` (None: remove the file) at ``path`` with
    ``mode`` (the whole ``st_mode``: ``0o100644``, ``0o100755``... or ``0o120000`` for
    a symlink), if the file holds ``expect`` (a blob id; None: absent)."""

    path: str
    blob: str | None = None
    mode: int | None = None
    expect: str | None = None


class RestoreStarted(Frozen):
    """Written and synced before any file is touched, so that a restore a kill cut
    short is finished when the session is resumed."""

    restore_id: str
    purpose: Literal["undo", "rewind", "fork"]
    turn: PositiveInt
    """The workspace goes back to before this turn."""
    target: str
    """The checkpoint restored to."""
    writes: tuple[FileWrite, ...] = ()
    conflicts: tuple[str, ...] = ()
    """Files changed by hand since the agent last saw them: left alone."""
    conversation: bool = False
    """The conversation is rewound to before ``turn`` too, once the files are (a
    ``history/rewound`` naming this restore): a process stopped between the two
    leaves the rewind to the next one that resumes the session."""


class RestoreDone(Frozen):
    restore_id: str
    applied: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    """Those of the plan and those found while applying."""
    resumed: bool = False
    """Finished by a later process, after the first was stopped."""
    error: str | None = None


_core_event("checkpoint/taken", CheckpointTaken)
_core_event("checkpoint/restoring", RestoreStarted)
_core_event("checkpoint/restored", RestoreDone)
