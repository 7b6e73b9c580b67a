"""The events of plan mode's review: a plan the model presented, and what the person
made of it.

Core types, registered when :mod:`dsh.session` is imported: a resumed session, ``dsh
sessions show`` and a replay read a plan and its verdict the same way, and the mode a
session went on in after an approved plan can be told from the log alone.
"""

from __future__ import annotations

from typing import Literal

from dsh.permission_modes import PermissionMode
from dsh.session.events import _core_event
from dsh.wire import Frozen

__all__ = ["PlanProposed", "PlanReviewOutcome", "PlanReviewed"]

PlanReviewOutcome = Literal["accept-edits", "default", "keep-planning", "cancelled", "unavailable"]
"""Approved, going on in ``accept-edits`` or in ``default`` mode; sent back to keep
planning (with a note); the review taken away (the turn cancelled), or nobody there to
review it (headless)."""


class PlanProposed(Frozen):
    review_id: str
    call_id: str
    """The plan tool's call that presented it."""
    plan: str
    """Markdown, as the model wrote it."""


class PlanReviewed(Frozen):
    review_id: str
    outcome: PlanReviewOutcome
    by: Literal["user", "headless"]
    note: str | None = None
    """What the person said with their verdict: for the model."""
    mode: PermissionMode | None = None
    """The permission mode the session went on in (approved plans only)."""


_core_event("plan/proposed", PlanProposed)
_core_event("plan/reviewed", PlanReviewed)
