"""The permission modes, narrowest first: defined once, for the ``[permissions]`` table,
the ``--permission-mode`` flag, what an untrusted project may set and the approvals
service. Light on purpose (only :mod:`typing`): the command line and settings read it
before anything heavy is imported."""

from __future__ import annotations

from typing import Literal, get_args

PermissionMode = Literal["read-only", "default", "accept-edits", "bypass"]
MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
"""Every mode, each allowing at least what the one before it allows."""
