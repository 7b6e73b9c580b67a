"""The permission modes, narrowest first: defined once, for the ``[permissions]`` table,
the ``--permission-mode`` flag, what an untrusted project may set and the approvals
service. Light on purpose (only :mod:`typing`): the command line and settings read it
before anything heavy is imported."""

from __future__ import annotations

from typing import Literal, get_args

PermissionMode = Literal["plan", "read-only", "default", "accept-edits", "bypass"]
MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
"""Every mode, each allowing at least what the one before it allows."""

PLANNING_MODES: frozenset[PermissionMode] = frozenset({"plan", "read-only"})
"""The modes that allow no writes: nothing may be allowed for the session in them."""

PLAN_MODE_TEXT = (
    "You are in plan mode: the person wants you to look and propose before anything "
    "changes. Read, search and run only commands that read (git log, ls); a call that "
    "writes a file or runs a command with effects is refused, not run. When you know "
    "enough, present your plan for approval (with the plan tool when one is offered, "
    "else as your answer): the steps, the files each one changes, and what could go "
    "wrong. Nothing is carried out until the person approves it and plan mode ends."
)
"""What the system prompt says while the mode is ``plan`` (and nothing otherwise, so
the prompt's cached prefix does not change with the mode)."""

PLAN_MODE_REFUSAL = (
    "you are in plan mode, where nothing that writes or runs a command with effects is "
    "executed. Keep exploring with reading tools, then present your plan for the "
    "person to approve"
)
"""Why a call with effects was refused in plan mode, as the model reads it."""
