"""The ``task`` tool: a child agent, in this process, does a piece of work in a fresh
context and hands back its final answer.

The child runs on a session of its own linked to the caller's
(:meth:`~dsh.agent.AgentService.delegate`), in the same folder, with the profile's
tools (the caller's when it names none), model and instructions. Its prompt is its
first message; its last words are the result. A child that fails or is cancelled gives
an error with what it had said so far. Cancelling the caller's turn cancels the child's.
The child's approvals go to the same approvers, labelled with the call's description;
it cannot ask the person questions (the questions service refuses a subagent). Each
of its paid calls is logged again in the caller's session (``subagent/paid``).

Read-only as far as the pipeline goes, so that several ``task`` calls of one step run
side by side: the child's own calls are each judged by the permissions as the
caller's are.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from dsh.agent import Agent, AgentHandle, AgentService
from dsh.hooks import SYSTEM_PROMPT_ASSEMBLE, TOOL_PRE_EXECUTE
from dsh.kernel import Context, Next
from dsh.llm import Finish, FinishRefusal, LlmService, user_text
from dsh.prompt import Assembly, AssemblyDraft, Section
from dsh.services import PROMPT
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    CancelByParent,
    SessionEvent,
    ToolCall,
    TurnAborted,
    TurnEnd,
    TurnFailed,
    paid_call,
    paid_request,
    session_spend,
)
from dsh.tools import (
    Action,
    AgentView,
    CallResult,
    ClaudeCodeName,
    Deny,
    Presentation,
    TextView,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from dsh_plugins.subagents.events import SUBAGENT_PAID, ChildCall, ChildRequest, SubagentPaid
from dsh_plugins.subagents.profiles import Profile, scan

NAME = "task"
INSTRUCTIONS = "subagent_instructions"
"""The prompt variable (and section) holding a profile's instructions, in a child's scope."""
STATUSES = {"aborted": "cancelled", "error": "failed"}
"""How a child's turn ended, in the words its card uses."""
MAX_ACTIVITY = 200
"""Lines of a child's activity kept in the result's meta."""

DESCRIPTION = (
    "Hand a self-contained piece of work to a subagent: a fresh agent with its own "
    "context, in the same working directory, that does the task and reports back. Use "
    "it for searches and investigations that would fill your context, or for "
    "independent parts of a task; several task calls in one reply run side by side. "
    "The subagent sees nothing of this conversation: the prompt must say everything it "
    "needs and what to report. Its final answer is the result (the user does not see "
    "it: summarise what matters). Choose a profile with `agent` when one in "
    "<available_agents> fits; without one it is a general agent with your tools."
)


class TaskArguments(BaseModel):
    description: str = Field(description="3-5 words saying what the subagent does (shown)")
    prompt: str = Field(
        description="the whole task: what to do, the context it needs, what to report back"
    )
    agent: str | None = Field(
        default=None, description="a profile's name from <available_agents>; none: general"
    )


@dataclass(frozen=True)
class Limits:
    max_depth: int
    home: Path
    project: Path | None
    """The project root when it is trusted: its profiles count only then."""


def task_tool(agents: AgentService, limits: Limits) -> ToolDefinition:
    async def execute(arguments: TaskArguments, context: ToolContext) -> ToolOutput:
        parent = context.agent
        if parent is None:
            raise ToolError("a subagent can only be started by an agent", "TASK_NO_AGENT")
        depth = parent.session.header.delegation_depth
        if depth >= limits.max_depth:
            raise ToolError(
                f"subagents may not nest deeper than {limits.max_depth}: do the task yourself",
                "TASK_TOO_DEEP",
            )
        profiles, _ = await asyncio.to_thread(scan, limits.home, limits.project)
        profile: Profile | None = None
        if arguments.agent:
            profile = profiles.get(arguments.agent.strip().lower())
            if profile is None:
                names = ", ".join(sorted(profiles)) or "none"
                raise ToolError(
                    f"there is no agent profile {arguments.agent!r} (available: {names}); "
                    "leave `agent` out for a general subagent",
                    "TASK_NO_PROFILE",
                )
        options = parent.options
        if profile is not None and profile.model is not None:
            options = options.model_copy(update={"model": profile.model})
        child_depth = depth + 1
        allowed = allowed_tools(profile, nested=child_depth < limits.max_depth)
        description = " ".join(arguments.description.split()) or "subagent"

        def setup(child_ctx: Context) -> None:
            scope_child(child_ctx, profile, allowed)

        child = await agents.delegate(
            parent,
            options,
            preset=profile.name if profile is not None else None,
            label=description,
            setup=setup,
        )
        run = _ChildRun(parent, child, context.progress)
        unsubscribe = child.session.subscribe(run.observe)
        try:
            child.followup(user_text(arguments.prompt))
            await child.when_idle()
        finally:
            # The caller's turn cancelled (this task cancelled with it), or done: the
            # child's turn ends as aborted by its parent, and its log is made durable.
            child.cancel(CancelByParent())
            await agents.dispose(child)
            unsubscribe()
        return run.output(description, profile, agents.services.llm)

    def present(arguments: dict[str, Any]) -> Presentation:
        return TextView(title=_title(arguments))

    def present_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
        meta = result.meta if isinstance(result.meta, dict) else {}
        lines = [str(line) for line in meta.get("activity", ()) if isinstance(line, str)]
        status = meta.get("status")
        session = meta.get("session")
        if not isinstance(session, str) or not session:
            title = _title(arguments) + (f" ({status})" if status and status != "completed" else "")
            body = "\n".join([*lines[-20:], "", result.text] if lines else [result.text])
            return TextView(title=title, body=body.strip() or None)
        # The card shows the tail: what the child did, then what it answered (or why
        # it stopped); its whole run opens from the card as its own transcript.
        said = result.text.strip().splitlines()
        return AgentView(
            title=_title(arguments),
            session_id=session,
            status=STATUSES.get(str(status), str(status)) if status else None,
            lines=(*lines, *said),
        )

    return ToolDefinition(
        name=NAME,
        description=DESCRIPTION,
        arguments=TaskArguments,
        execute=execute,
        read_only=True,
        kind="other",
        describe=lambda arguments, context: Action(
            risk="read", summary=f"subagent: {arguments.description}"
        ),
        spill_output=True,
        present_call=present,
        present_result=present_result,
        claude_code=ClaudeCodeName("Agent", fields=(("agent", "subagent_type"),), older=("Task",)),
    )


def _title(arguments: dict[str, Any]) -> str:
    description = " ".join(str(arguments.get("description") or "").split()) or "subagent"
    agent = arguments.get("agent")
    return f"Task ({agent}): {description}" if agent else f"Task: {description}"


def allowed_tools(profile: Profile | None, *, nested: bool) -> Callable[[str], bool]:
    """Which tools the child may see and call: the profile's (all when it names none),
    never ``task`` at the depth limit."""
    names = None if profile is None else profile.tools

    def allowed(name: str) -> bool:
        if name == NAME and not nested:
            return False
        return names is None or name in names

    return allowed


def scope_child(ctx: Context, profile: Profile | None, allowed: Callable[[str], bool]) -> None:
    """What the child's own scope holds: its tools filtered (hidden from its requests,
    refused if it calls one anyway) and the profile's instructions as a prompt section."""

    async def assemble(draft: AssemblyDraft, next_: Next[AssemblyDraft, Assembly]) -> Assembly:
        assembly = await next_()
        return replace(assembly, tools=tuple(t for t in assembly.tools if allowed(t.name)))

    async def refuse(
        tool: ToolDefinition, arguments: Any, action: Action, context: ToolContext
    ) -> Deny | None:
        if allowed(tool.name):
            return None
        return Deny(f"{tool.name} is not among this subagent's tools")

    ctx.on(SYSTEM_PROMPT_ASSEMBLE, assemble)
    ctx.on(TOOL_PRE_EXECUTE, refuse)
    if profile is not None and profile.instructions:
        prompt = ctx.get(PROMPT)
        text = profile.instructions
        # Through a variable: its value is inserted as it is, so a profile's own
        # ``{{`` is not taken for a reference.
        prompt.variable(INSTRUCTIONS, lambda pc: text)
        prompt.add_section(Section(INSTRUCTIONS, 900, "{{" + INSTRUCTIONS + "}}"))


class _ChildRun:
    """What the caller learns of a running child: each tool call as a progress line,
    each paid call logged again in the caller's session."""

    def __init__(self, parent: AgentHandle, child: Agent, progress: Callable[[str], None]) -> None:
        self.parent = parent
        self.child = child
        self.progress = progress
        self.activity: list[str] = []

    def observe(self, event: SessionEvent) -> None:
        data = event.data
        if isinstance(data, ToolCall):
            line = _activity(data)
            if len(self.activity) < MAX_ACTIVITY:
                self.activity.append(line)
            self.progress(line)
        call = paid_call(event)
        request = None if call is not None else paid_request(event)
        if call is None and request is None:
            return
        self.parent.session.append(
            SUBAGENT_PAID.name,
            SubagentPaid(
                session=self.child.id,
                call=(
                    ChildCall(provider=call.provider, model=call.model, usage=call.usage)
                    if call is not None
                    else None
                ),
                request=(
                    ChildRequest(service=request.service, cost=request.cost)
                    if request is not None
                    else None
                ),
            ),
        )

    def output(self, description: str, profile: Profile | None, llm: LlmService) -> ToolOutput:
        events = self.child.session.events
        ended = next((e.data for e in reversed(events) if isinstance(e.data, TurnEnd)), None)
        answer = ""
        for event in reversed(events):
            if isinstance(event.data, AssistantMessageData):
                text = event.data.message.text().strip()
                if text:
                    answer = text
                    break
        reason = ended.reason if ended is not None else None
        status = reason.kind if reason is not None else "cancelled"
        spend = session_spend(events, llm.cost)
        usage = spend.usage
        meta = {
            "session": self.child.id,
            "agent": profile.name if profile is not None else None,
            "description": description,
            "status": status,
            "activity": self.activity,
            "usage": {
                "calls": spend.calls,
                "inputTokens": usage.billed_input_tokens if usage else 0,
                "outputTokens": usage.output_tokens if usage else 0,
                "costUsd": spend.cost,
            },
        }
        if status == "completed" and not _refused(events):
            return ToolOutput(answer or "(the subagent finished without a word)", meta=meta)
        if status == "completed":
            meta["status"] = "refusal"
            return ToolOutput(f"the subagent's model refused: {answer}", is_error=True, meta=meta)
        if isinstance(reason, TurnAborted):
            why = f"the subagent was cancelled ({reason.reason.kind})"
        elif isinstance(reason, TurnFailed):
            why = f"the subagent failed: {reason.error.message}"
        elif reason is None:
            why = "the subagent did not finish"
        else:
            why = f"the subagent stopped early ({status})"
        partial = f"\n\nWhat it said before it stopped:\n{answer}" if answer else ""
        return ToolOutput(f"{why}{partial}", is_error=True, meta=meta)


def _refused(events: Sequence[SessionEvent]) -> bool:
    """Whether the child's last answer was its model declining (its text the refusal)."""
    for event in reversed(events):
        data = event.data
        if isinstance(data, AssistantChunk) and isinstance(data.chunk, Finish):
            return isinstance(data.chunk.reason, FinishRefusal)
    return False


_ARGUMENT_KEYS = ("command", "path", "file_path", "pattern", "query", "url", "name", "description")


def _activity(call: ToolCall) -> str:
    """One short line for a child's tool call: ``read src/a.py``, ``bash pytest -q``."""
    detail = ""
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        arguments = {}
    if isinstance(arguments, dict):
        for key in _ARGUMENT_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                detail = " ".join(value.split())
                break
    if len(detail) > 80:
        detail = detail[:79] + "…"
    return f"{call.name} {detail}".strip()
