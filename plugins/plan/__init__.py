"""Plan mode's tool and command: ``exit_plan_mode`` presents the model's plan for the
person to approve, ``/plan [prompt]`` enters plan mode.

In plan mode (:mod:`dsh.permission_modes`) the model reads and proposes; nothing
with effects runs. When its plan is ready it calls ``exit_plan_mode`` with the plan
in Markdown, and the approvals service asks the front end's reviewer
(:meth:`ApprovalService.review_plan <dsh.tools.approval.ApprovalService.review_plan>`,
which logs ``plan/proposed`` and ``plan/reviewed``): approved, the mode becomes the
one the person chose and the model carries the plan out in the same turn; sent back,
the person's note reaches the model and the mode stays ``plan``. Where nobody reviews
(``dsh -p`` without a driver) the plan is the run's result and the model is told to
end its turn.

``[plugins.plan] directory`` saves each proposed plan to a Markdown file there
(:mod:`dsh_plugins.plan.saving`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dsh.commands import Command, CommandContext
from dsh.kernel import Context, Plugin
from dsh.llm import user_text
from dsh.prompt import PromptContext
from dsh.services import APPROVALS, COMMANDS, PROMPT, SETTINGS, TOOLS
from dsh.tools import (
    Action,
    CallResult,
    Presentation,
    TextView,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from dsh.tools.plan_review import PlanDecision
from dsh_plugins.plan.saving import Config, Saving

TOOL = "exit_plan_mode"

DESCRIPTION = (
    "Present your plan for the user to approve. Only in plan mode, once you have read "
    "enough to know what to change. `plan`: Markdown: the steps, the files each one "
    "changes, and the risks. The user approves it (the permission mode then changes "
    "and you carry the plan out at once, in this turn) or sends it back with a note "
    "(revise it and present it again)."
)

SECTION = (
    "When your plan is ready, present it with the exit_plan_mode tool (the whole plan, "
    "in Markdown), not as a question in your answer: the tool asks the user. If they "
    "approve it, carry it out at once, step by step, in the same turn; if they send it "
    "back, revise it as their note says and present it again."
)
"""What the prompt says in plan mode, after the core's plan-mode section."""

SECTION_ORDER = 10_001
"""After the core's plan-mode section (10 000): both last, so the prompt's cached
prefix is the same in every mode."""

# Presenting a plan is the user's turn to speak: it needs no approval (so plan mode
# allows it), and the tool is not read-only, so two reviews never open at once.
NEVER_NEEDS_APPROVAL = Action(risk="read", summary="present a plan")


class PlanArguments(BaseModel):
    plan: str = Field(
        min_length=1,
        description="the plan in Markdown: the steps, the files each one changes, the risks",
    )


def result_text(decision: PlanDecision) -> str:
    """What the model reads of the person's decision (``cancelled`` is an error)."""
    note = decision.note.strip() if decision.note else ""
    match decision.outcome:
        case "accept-edits" | "default":
            said = f" Their note: {note}" if note else ""
            return (
                f"The user approved your plan. Permission mode is now {decision.outcome}: "
                f"carry it out now, step by step.{said}"
            )
        case "keep-planning":
            said = f" Their note: {note}." if note else ""
            return (
                f"The user wants you to keep planning.{said} Stay in plan mode: revise the "
                "plan and present it again with exit_plan_mode."
            )
        case _ if note:
            # The reviewer failed: said as it is, the plan is in the log anyway.
            return (
                f"Your plan could not be reviewed ({note}); it is recorded in the session. "
                "End your turn now: do not repeat the plan and do not start carrying it out."
            )
        case _:
            return (
                "Nobody can approve plans here (dsh runs headless); the plan is recorded as "
                "this run's result. End your turn now: do not repeat the plan and do not "
                "start carrying it out."
            )


def plan_tool(saving: Saving) -> ToolDefinition:
    async def exit_plan_mode(arguments: PlanArguments, context: ToolContext) -> ToolOutput:
        agent = context.agent
        services = context.services
        approvals = services.get(APPROVALS, None) if services is not None else None
        if agent is None or approvals is None:
            raise ToolError("exit_plan_mode needs a session and its approvals", "NO_PROVIDER")
        if agent.session.header.origin == "subagent":
            raise ToolError("you run as a subagent: return your plan as your answer", "SUBAGENT")
        if approvals.mode != "plan":
            raise ToolError(
                f"you are not in plan mode (the permission mode is {approvals.mode}): there is "
                "nothing to approve; go on within the current permissions",
                "NOT_PLANNING",
            )
        saved = await saving.save(arguments.plan, context.cwd)
        decision: PlanDecision = await approvals.review_plan(
            arguments.plan,
            session=agent.session,
            call_id=context.call_id,
            signal=context.signal,
            agent_label=agent.label,
        )
        if decision.outcome == "cancelled":
            why = f" ({decision.note})" if decision.note else ""
            raise ToolError(
                f"the review of your plan was cancelled{why}: nothing was approved and you "
                "are still in plan mode",
                "ASK_ABORTED",
            )
        text = result_text(decision)
        if saved.said:
            text = f"{text}\n\n{saved.said}"
        meta = {"outcome": decision.outcome, "note": decision.note, "saved": saved.path}
        return ToolOutput(content=text, meta=meta)

    return ToolDefinition(
        name=TOOL,
        description=DESCRIPTION,
        arguments=PlanArguments,
        execute=exit_plan_mode,
        kind="other",
        describe=lambda arguments, context: NEVER_NEEDS_APPROVAL,
        present_call=present_call,
        present_result=present_result,
    )


def _plan(arguments: dict[str, Any]) -> str | None:
    plan = arguments.get("plan")
    return plan if isinstance(plan, str) and plan.strip() else None


def present_call(arguments: dict[str, Any]) -> Presentation:
    """The plan as Markdown, while the person reads it."""
    return TextView(title="Plan", body=_plan(arguments), language="markdown")


def present_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
    """The same card, its title saying what became of the plan."""
    return TextView(title=result_title(result), body=_plan(arguments), language="markdown")


def result_title(result: CallResult) -> str:
    meta = result.meta if isinstance(result.meta, dict) else {}
    outcome = meta.get("outcome")
    note = meta.get("note")
    brief = _one_line(note) if isinstance(note, str) else ""
    if result.is_error:
        # Cancelled in the review, or with the call (the turn's cancel ends the call
        # before the tool's own answer): either way it was shown, not reviewed.
        if result.error_code in ("ASK_ABORTED", "TOOL_CANCELLED"):
            return "Plan not reviewed: the turn was cancelled"
        return f"Plan not presented: {_one_line(result.text)}"
    match outcome:
        case "accept-edits" | "default":
            return f"Plan approved · {outcome}"
        case "keep-planning":
            return f"Plan sent back: {brief}" if brief else "Plan sent back"
        case "unavailable" if brief:
            return f"Plan not reviewed: {brief}"
        case "unavailable":
            return "Plan not reviewed (headless)"
    return "Plan"


def _one_line(text: str, width: int = 80) -> str:
    lines = text.strip().splitlines()
    line = lines[0].strip() if lines else ""
    if len(line) > width or len(lines) > 1:
        return line[: width - 1].rstrip() + "…"
    return line


PLANNING = "the model reads and proposes a plan; nothing is changed until you approve it"


async def plan_command(context: CommandContext, args: str) -> None:
    """``/plan [prompt]``: plan mode, then the prompt (if any) as the person's message."""
    approvals = context.root.get(APPROVALS)
    prompt = args.strip()
    if approvals.mode != "plan":
        approvals.mode = "plan"  # every front end hears it (permissions/mode-changed)
        context.host.show(f"Plan mode: {PLANNING}.")
    elif not prompt:
        context.host.show(f"Already in plan mode: {PLANNING}.")
    if prompt:
        context.agent.followup(user_text(prompt))


PLAN_COMMAND = Command(
    name="plan",
    description="Plan mode: the model reads and proposes a plan for you to approve",
    run=plan_command,
    arguments="[prompt]",
)


def apply(ctx: Context, config: Config) -> None:
    settings = ctx.get(SETTINGS, None)
    saving = Saving(config.directory, settings.root if settings is not None else None)
    ctx.get(TOOLS).register(TOOL, plan_tool(saving))
    approvals = ctx.get(APPROVALS)

    def section(pc: PromptContext) -> str | None:
        return SECTION if approvals.mode == "plan" else None

    ctx.get(PROMPT).section("plan-tool", SECTION_ORDER, section)
    ctx.get(COMMANDS).register(PLAN_COMMAND.name, PLAN_COMMAND)


plugin = Plugin(
    name="plan",
    inject=(TOOLS, APPROVALS, PROMPT, COMMANDS),
    optional=(SETTINGS,),
    config=Config,
    apply=apply,
    description="plan mode's exit_plan_mode tool (the plan reviewed by the person) and /plan",
)
