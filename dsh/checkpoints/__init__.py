"""Workspace checkpoints: snapshots of the project's files before each step with
effects and at each turn's end, kept in a private git object store under
``$DSH_HOME/checkpoints/``, and restoring them (``/undo``, ``/rewind``, a fork at a
turn) file by file, resumably.

Public API: :class:`Checkpoints` (the ``checkpoints`` service,
:data:`dsh.services.CHECKPOINTS`), :class:`RestorePlan`, :class:`FileSummary`,
:class:`RestoreOutcome`, :class:`TurnCheckpoints`, :class:`TurnCheckpoint`,
:class:`CheckpointError`; ``/undo`` is
:func:`dsh.checkpoints.commands.undo_command`.
"""

from __future__ import annotations

from dsh.checkpoints.restore import (
    FileSummary,
    RestoreOutcome,
    RestorePlan,
    TurnCheckpoint,
    TurnCheckpoints,
)
from dsh.checkpoints.service import Checkpoints
from dsh.checkpoints.store import CheckpointError

__all__ = [
    "CheckpointError",
    "Checkpoints",
    "FileSummary",
    "RestoreOutcome",
    "RestorePlan",
    "TurnCheckpoint",
    "TurnCheckpoints",
]
