"""The plan review seam: the model presents a plan in plan mode, the person decides.

A plan tool calls :meth:`ApprovalService.review_plan
<dsh.tools.approval.ApprovalService.review_plan>`, which logs ``plan/proposed``, asks
through the ``plan/review`` hook (:data:`dsh.hooks.PLAN_REVIEW`) where a front end
registered its reviewer, logs ``plan/reviewed`` and, when the plan is approved, sets
the permission mode the person chose (every front end hears it on
:data:`dsh.hooks.PERMISSION_MODE_CHANGED`). With no reviewer (headless without a
driver) the review is unavailable and the mode stays ``plan``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from dsh.kernel import First
from dsh.permission_modes import PermissionMode
from dsh.wire import Frozen

PlanOutcome = Literal["accept-edits", "default", "keep-planning", "cancelled", "unavailable"]
"""What a reviewer answers (``plan/reviewed`` logs the same words)."""

APPROVED_MODES: dict[PlanOutcome, PermissionMode] = {
    "accept-edits": "accept-edits",
    "default": "default",
}
"""The mode an approved plan is carried out in, by outcome."""

CHOICES: tuple[tuple[PlanOutcome, str, str], ...] = (
    ("accept-edits", "Approve, accept edits", "carry it out; edits in the project run unasked"),
    ("default", "Approve, ask as usual", "carry it out; each edit and command is asked about"),
    ("keep-planning", "Keep planning", "say what to change; nothing runs yet"),
)
"""The three answers to a plan, in the order every front end offers them: outcome,
label, what it means."""


class PlanReview(Frozen):
    id: str
    session_id: str
    call_id: str
    plan: str
    """Markdown, as the model wrote it."""
    agent_label: str | None = None


class PlanDecision(Frozen):
    outcome: PlanOutcome
    note: str | None = None
    """Said to the model: what to change (keep planning), or anything to keep in mind."""


Reviewer = Callable[[PlanReview], Awaitable[PlanDecision]]


PLAN_REVIEW: First[[PlanReview], PlanDecision] = First(
    "plan/review",
    doc="the model presented a plan in plan mode: the newest reviewer (a UI) approves "
    "it (going on in accept-edits or default mode) or sends it back with a note; none "
    "at all leaves the mode as it is (headless)",
)
