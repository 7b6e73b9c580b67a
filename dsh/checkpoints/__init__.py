"""Workspace checkpoints: snapshots of the project's files kept in a private git
object store under ``$DSH_HOME/checkpoints/``, and restoring them file by file,
resumably.

Public API: :class:`CheckpointError`.
"""

from __future__ import annotations

from dsh.checkpoints.store import CheckpointError

__all__ = ["CheckpointError"]
