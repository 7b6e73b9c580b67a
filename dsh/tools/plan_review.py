"""The plan review seam: the model presents a plan in plan mode, the person decides.

A plan tool calls :meth:`ApprovalService.review_plan
<dsh.tools.approval.ApprovalService.review_plan>`, which logs ``plan/proposed``, asks
through the ``plan/review`` hook (:data:`dsh.hooks.PLAN_REVIEW`) where a front end
registered its reviewer, logs ``plan/reviewed`` and, when the plan is approved, sets
the permission mode the person chose (every front end hears it on
:data:`dsh.hooks.PERMISSION_MODE_CHANGED`). With no reviewer (headless without a
driver) the review is unavailable and the mode stays ``plan``.

A front end without a dialog of its own for plans can ask the review as a question
(:func:`review_question`, :func:`review_decision`): the three choices as options, any
other answer the note for the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from dsh.permission_modes import PermissionMode
from dsh.tools.questions import Answer, Question, QuestionOption
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


def review_question(review: PlanReview) -> Question:
    """The review as one single-choice question (the plan itself is in the transcript,
    on the plan tool's card)."""
    return Question(
        id=review.id,
        header="Plan",
        question="The plan is ready. Carry it out? (Type anything else to keep planning "
        "with it as your note.)",
        options=tuple(QuestionOption(label=label, description=what) for _, label, what in CHOICES),
    )


def review_decision(answers: Sequence[Answer] | None) -> PlanDecision:
    """The decision an answer to :func:`review_question` means: a picked option, or
    the person's own words as a note to keep planning; None or nothing picked is a
    dismissal (the turn goes on in plan mode)."""
    if not answers:
        return PlanDecision(outcome="cancelled", note="the person closed the review")
    answer = answers[0]
    for outcome, label, _ in CHOICES:
        if label in answer.selected:
            return PlanDecision(outcome=outcome, note=answer.custom)
    if answer.custom:
        return PlanDecision(outcome="keep-planning", note=answer.custom)
    return PlanDecision(outcome="cancelled", note="the person closed the review")
