"""Plan mode in an editor: the plan asked as ``session/request_permission`` on the plan
tool's call, and the modes dsh switches to told as ``current_mode_update``."""

from __future__ import annotations

from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from dsh.tools.plan_review import PlanDecision
from dsh.ui.acp.permissions import plan_decision, plan_options


def picked(option_id: str) -> RequestPermissionResponse:
    return RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id=option_id)
    )


def test_the_three_answers_are_offered_in_order_with_their_kinds() -> None:
    assert [(o.option_id, o.name, o.kind) for o in plan_options()] == [
        ("accept-edits", "Yes, and accept edits", "allow_always"),
        ("default", "Yes, and ask as usual", "allow_once"),
        ("keep-planning", "No, keep planning", "reject_once"),
    ]


def test_the_editors_answer_is_the_decision() -> None:
    assert plan_decision(picked("accept-edits")) == PlanDecision(outcome="accept-edits")
    assert plan_decision(picked("default")) == PlanDecision(outcome="default")
    assert plan_decision(picked("keep-planning")) == PlanDecision(outcome="keep-planning")
    cancelled = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    assert plan_decision(cancelled).outcome == "cancelled"
    # An option dsh never offered approves nothing.
    assert plan_decision(picked("allow-once")) == PlanDecision(outcome="keep-planning")
    assert plan_decision(picked("bypass")) == PlanDecision(outcome="keep-planning")
