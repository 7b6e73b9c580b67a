"""Approvals, questions and plans as ``session/request_permission``.

An approval offers the editor the four ACP options: allow once, allow always (the
same narrow session grant the TUI offers, when the approvals service offers one;
signed and logged as every grant is, so a resumed session keeps it), reject once and
reject always (the approvals service's session denial: logged with the grant's
rules, so a call asking for the same grant again is denied unasked, after a resume
too). A question with a single choice among labelled options is asked the same way;
any other is answered with a note that tells the model to ask in its reply. A plan
is asked on the plan tool's call, the plan its text content, with dsh's three answers
as options (approve in accept-edits, approve asking as usual, keep planning); the
protocol has no free text, so "keep planning" sends it back without a note (the
person says what to change in their next prompt).
"""

from __future__ import annotations

from collections.abc import Sequence

from acp.schema import (
    AllowedOutcome,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    PermissionOptionKind,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallLocation,
    ToolCallUpdate,
)

from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import CHOICES, PlanDecision, PlanOutcome, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.ui.acp.updates import diff_texts

ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS = (
    "allow-once",
    "allow-always",
    "reject-once",
    "reject-always",
)
PLAN_OPTIONS: dict[PlanOutcome, tuple[str, PermissionOptionKind]] = {
    "accept-edits": ("Yes, and accept edits", "allow_always"),
    "default": ("Yes, and ask as usual", "allow_once"),
    "keep-planning": ("No, keep planning", "reject_once"),
}
"""The answers to a plan as the editor offers them (the option id is the outcome):
the name, and the kind an editor picks its icon and keyboard shortcut by."""
PLAN_TITLE = "Ready to carry out the plan?"
CANNOT_ASK = (
    "(the editor cannot show this question as a choice: ask it in your reply instead, "
    "and the person will answer in their next message)"
)


def approval_options(request: ApprovalRequest) -> list[PermissionOption]:
    options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once")]
    if request.grant:
        covers = f" ({request.grant_covers})" if request.grant_covers else ""
        options.append(
            PermissionOption(
                option_id=ALLOW_ALWAYS,
                name=f"Allow for this session{covers}",
                kind="allow_always",
            )
        )
    options.append(PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"))
    if request.grant:
        options.append(
            PermissionOption(
                option_id=REJECT_ALWAYS, name="Reject for this session", kind="reject_always"
            )
        )
    return options


def approval_call(request: ApprovalRequest) -> ToolCallUpdate:
    """The tool call the request is about, as the editor shows it in the request: the
    files it would write, the change itself when the tool's details are a diff of one
    file, and why it is asked (that the sandbox cannot start, what an escalation
    widens: what the person must know to answer)."""
    content: list[FileEditToolCallContent | ContentToolCallContent] = []
    if request.reason:
        content.append(
            ContentToolCallContent(
                type="content",
                content=TextContentBlock(type="text", text=request.reason),
            )
        )
    details = request.details or ""
    if request.risk == "write" and len(request.paths) == 1 and "\n@@" in f"\n{details}":
        content.append(
            FileEditToolCallContent(type="diff", path=request.paths[0], **diff_texts(details))
        )
    return ToolCallUpdate(
        tool_call_id=request.call_id,
        # A subagent's call is not one of the editor's tool calls: the title says whose.
        title=f"{request.agent_label}: {request.summary}"
        if request.agent_label
        else request.summary,
        status="pending",
        locations=[ToolCallLocation(path=path) for path in request.paths] or None,
        content=content or None,
    )


def decision(response: RequestPermissionResponse) -> ApprovalDecision:
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return ApprovalDecision(outcome="cancelled", feedback="the editor cancelled it")
    match outcome.option_id:
        case "allow-once":
            return ApprovalDecision(outcome="allow_once")
        case "allow-always":
            return ApprovalDecision(outcome="allow_session")
        case "reject-always":
            return ApprovalDecision(outcome="deny_session")
        case _:
            return ApprovalDecision(outcome="deny")


def plan_options() -> list[PermissionOption]:
    """The three answers, in the order every front end offers them."""
    return [
        PermissionOption(
            option_id=outcome, name=PLAN_OPTIONS[outcome][0], kind=PLAN_OPTIONS[outcome][1]
        )
        for outcome, _, _ in CHOICES
    ]


def plan_call(review: PlanReview) -> ToolCallUpdate:
    """The plan tool's call, as the editor shows it in the request: the plan (Markdown)
    as its content, and the kind that says it switches modes."""
    return ToolCallUpdate(
        tool_call_id=review.call_id,
        title=f"{review.agent_label}: {PLAN_TITLE}" if review.agent_label else PLAN_TITLE,
        kind="switch_mode",
        status="pending",
        content=[
            ContentToolCallContent(
                type="content", content=TextContentBlock(type="text", text=review.plan)
            )
        ],
    )


def plan_decision(response: RequestPermissionResponse) -> PlanDecision:
    """The answer picked; cancelled (the editor's turn was cancelled) when none was. An
    option dsh did not offer approves nothing: the plan goes back to the model."""
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return PlanDecision(outcome="cancelled", note="the editor cancelled it")
    for offered, _, _ in CHOICES:
        if outcome.option_id == offered:
            return PlanDecision(outcome=offered)
    return PlanDecision(outcome="keep-planning")


def askable(questions: Sequence[Question]) -> Question | None:
    """The question the editor can ask as a choice: one, single-select, with options."""
    if len(questions) != 1:
        return None
    question = questions[0]
    if question.multi_select or not question.options:
        return None
    return question


def question_options(question: Question) -> list[PermissionOption]:
    return [
        PermissionOption(
            option_id=str(index),
            name=f"{option.label}: {option.description}" if option.description else option.label,
            kind="allow_once",
        )
        for index, option in enumerate(question.options)
    ]


def question_answer(question: Question, response: RequestPermissionResponse) -> Answer | None:
    """The answer picked, or None (dismissed)."""
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return None
    try:
        picked = question.options[int(outcome.option_id)]
    except (ValueError, IndexError):
        return None
    return Answer(id=question.id, selected=(picked.label,))


def refusals(questions: Sequence[Question]) -> list[Answer]:
    return [Answer(id=question.id, custom=CANNOT_ASK) for question in questions]
