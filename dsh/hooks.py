"""Every hook point of the core, declared once: name, call style, arguments, result.

This module is public API. A plugin listens with ``ctx.on(SPEC, fn)`` and a type
checker holds ``fn`` to the spec; the core dispatches with the method of the spec's
style (``emit``, ``parallel``, ``serial``, ``waterfall``). The styles, and how a
spec says whose event a dispatch is, are described in :mod:`dsh.kernel` (the
classes :class:`~dsh.kernel.Notify`, :class:`~dsh.kernel.Gather`,
:class:`~dsh.kernel.First`, :class:`~dsh.kernel.Chain`, re-exported here so a
plugin declares hooks of its own with them).

Hooks whose subject is the agent are heard by global listeners for every agent, and
by a listener registered on an agent's own context only for that agent.

The argument and result types live with their vocabulary (:mod:`dsh.agent`,
:mod:`dsh.llm`, :mod:`dsh.prompt`, :mod:`dsh.tools`); they are imported here only
for the type checker, because the modules that dispatch these hooks import this one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from dsh.kernel import KERNEL_ERROR, Chain, First, Gather, Hook, Next, Notify

if TYPE_CHECKING:
    from dsh.agent import AgentHandle, Status
    from dsh.agent.interception import (
        Attached,
        Attachment,
        MentionChoice,
        PasteResult,
        PreRequest,
        PreStep,
        PreStepDecision,
        PromptDecision,
        PromptSubmit,
        RequestError,
        Retry,
    )
    from dsh.agent.signal import TurnSignal
    from dsh.doctor import Check, DoctorAsk
    from dsh.llm import GenerateOptions, LlmCallConfig, RetryNotice, StreamChunk, UserMessage
    from dsh.permission_modes import PermissionMode
    from dsh.prompt import Assembly, AssemblyDraft
    from dsh.tools import (
        Action,
        Allow,
        Amend,
        Answered,
        Ask,
        BlockResult,
        CallOutcome,
        Deny,
        Rewrite,
        ToolContext,
        ToolDefinition,
    )
    from dsh.tools.approval import ApprovalDecision, ApprovalRequest
    from dsh.tools.plan_review import PlanDecision, PlanReview
    from dsh.tools.questions import Answer, Dismissed, Question

__all__ = [
    "AGENT_CREATED",
    "AGENT_DISPOSED",
    "AGENT_ERROR",
    "AGENT_PRE_STEP",
    "AGENT_PROMPT_BLOCKED",
    "AGENT_PROMPT_SUBMIT",
    "AGENT_REQUEST",
    "AGENT_REQUEST_ERROR",
    "AGENT_SESSION_END",
    "AGENT_SESSION_START",
    "AGENT_STATUS",
    "AGENT_TURN_STOPPING",
    "APPROVAL_ASK",
    "COMMANDS_SETTLE",
    "CORE_HOOKS",
    "DOCTOR_CHECK",
    "HISTORY_SUMMARISE",
    "KERNEL_ERROR",
    "LLM_RETRY",
    "LLM_STREAM",
    "PERMISSION_MODE_CHANGED",
    "PLAN_REVIEW",
    "PROMPT_ATTACH",
    "PROMPT_PASTE",
    "QUESTION_ASK",
    "SESSION_TITLE_NOW",
    "SYSTEM_PROMPT_ASSEMBLE",
    "TOOL_POST_EXECUTE",
    "TOOL_PRE_EXECUTE",
    "Chain",
    "First",
    "Gather",
    "Hook",
    "Next",
    "Notify",
]


def _agent(agent: AgentHandle, *rest: object) -> AgentHandle:
    """The subject of a hook whose first argument is the agent."""
    return agent


# ---------------------------------------------------------------------- agents

AGENT_CREATED: Notify[[AgentHandle]] = Notify(
    "agent/created", subject=_agent, doc="an agent was made, before its session starts"
)
AGENT_SESSION_START: Gather[[AgentHandle, str], None] = Gather(
    "agent/session-start",
    subject=_agent,
    doc="an agent's session starts (source: 'startup', 'resume' or 'subagent'); awaited before the "
    "agent is handed out",
)
AGENT_STATUS: Notify[[AgentHandle, Status]] = Notify(
    "agent/status", subject=_agent, doc="the agent went 'running' or 'idle'"
)
AGENT_ERROR: Notify[[AgentHandle, BaseException]] = Notify(
    "agent/error", subject=_agent, doc="a turn failed with an unexpected error"
)
AGENT_SESSION_END: Gather[[AgentHandle, str], None] = Gather(
    "agent/session-end",
    subject=_agent,
    doc="an agent's session is about to end (reason: 'clear' when a new session takes "
    "its place, 'resume' when another stored one does, 'exit' when the person quits an "
    "interactive UI, 'other' for anything else); awaited before the agent is stopped",
)
AGENT_DISPOSED: Notify[[AgentHandle]] = Notify(
    "agent/disposed", subject=_agent, doc="an agent was stopped and its session closed"
)
AGENT_PROMPT_SUBMIT: Chain[PromptSubmit, PromptDecision] = Chain(
    "agent/prompt-submit",
    subject=lambda submit: submit.agent,
    doc="a queued prompt is about to open a turn: allow it (maybe rewritten, with "
    "context added) or block it",
)
AGENT_PROMPT_BLOCKED: Notify[[AgentHandle, UserMessage, str]] = Notify(
    "agent/prompt-blocked",
    subject=_agent,
    doc="a prompt-submit listener blocked a prompt (the prompt, the reason)",
)
AGENT_PRE_STEP: Chain[PreStep, PreStepDecision] = Chain(
    "agent/pre-step",
    subject=lambda pre: pre.agent,
    doc="a step is about to start: the messages it enters, or a rejection of the turn",
)
AGENT_REQUEST: Chain[PreRequest, LlmCallConfig] = Chain(
    "agent/request",
    subject=lambda request: request.agent,
    doc="the call config of the next model request (provider, model, effort, sampling)",
)
AGENT_REQUEST_ERROR: Chain[RequestError, Retry | None] = Chain(
    "agent/request-error",
    subject=lambda error: error.agent,
    doc="a model request failed for good: Retry it in the same step, or let the turn end",
)
AGENT_TURN_STOPPING: First[[AgentHandle, int, TurnSignal], bool] = First(
    "agent/turn-stopping",
    subject=_agent,
    doc="the turn (by number) is about to end; a listener that steers the agent keeps "
    "it going, and returns True so the listeners after it are not asked",
)
PROMPT_PASTE: First[[AgentHandle, str | None], PasteResult] = First(
    "prompt/paste",
    subject=_agent,
    doc="something was pasted into an interactive UI's prompt (the text), or the person "
    "asked for the clipboard's content the terminal does not paste (None: Ctrl+V); a "
    "listener that takes it returns what the prompt shows instead",
)
PROMPT_ATTACH: First[[AgentHandle, Sequence[Attachment]], Attached] = First(
    "prompt/attach",
    subject=_agent,
    doc="a front end's client sent bytes with a prompt (an editor's image) of a media "
    "type a registered block takes (dsh.llm.attachable_media): the listener that takes "
    "them checks and stores them and returns the blocks the prompt carries, or why not",
)
PROMPT_MENTIONS: Gather[[AgentHandle, str], Sequence[MentionChoice]] = Gather(
    "prompt/mentions",
    subject=_agent,
    doc="the person is typing an @mention in an interactive UI's prompt (the text "
    "after the @): choices to offer besides the project's files",
)

HISTORY_SUMMARISE: Gather[[AgentHandle, str, str], str | None] = Gather(
    "history/summarise",
    subject=_agent,
    doc="the agent's older history is about to be replaced by a summary (trigger: "
    "'manual' when the person asked for it, 'auto'; the person's instructions for the "
    "summary, or ''): a listener that returns a reason refuses it, and nothing is "
    "summarised",
)

# ---------------------------------------------------------------------- model calls

LLM_STREAM: Chain[GenerateOptions, AsyncIterator[StreamChunk]] = Chain(
    "llm/stream",
    doc="one attempt at a model call: the chunks (wrap them, or change the options)",
)
LLM_RETRY: Notify[[RetryNotice]] = Notify(
    "llm/retry", doc="a failed attempt will be retried after a delay"
)

# ---------------------------------------------------------------------- the system prompt

SYSTEM_PROMPT_ASSEMBLE: Chain[AssemblyDraft, Assembly] = Chain(
    "system-prompt/assemble",
    subject=lambda draft: draft.context.scope,
    doc="the assembled system prompt, tools and context entries of a request",
)

# ---------------------------------------------------------------------- tools


def _caller(tool: ToolDefinition, arguments: Any, what: object, context: ToolContext) -> object:
    """The subject of a tool hook: the agent whose turn made the call."""
    return context.agent


TOOL_PRE_EXECUTE: Gather[
    [ToolDefinition, Any, Action, ToolContext], Deny | Ask | Allow | Rewrite | Answered | None
] = Gather(
    "tool/pre-execute",
    subject=_caller,
    doc="a validated call, before permission: Deny it, Ask the person even where rules "
    "allow it, Allow it as an allow rule would (this call alone), or Rewrite its "
    "arguments (judged again as rewritten), or answer it with an outcome of its own "
    "(Answered: the tool does not run); an answer wins, then the first denial in "
    "listener order, else the first rewrite applies, then the first ask, else an allow",
)
TOOL_POST_EXECUTE: Gather[
    [ToolDefinition, Any, CallOutcome, ToolContext], BlockResult | Amend | None
] = Gather(
    "tool/post-execute",
    subject=_caller,
    doc="a call ran: turn its result into an error the model reads (BlockResult, the "
    "first in listener order wins) or add to it (Amend, all in listener order)",
)
APPROVAL_ASK: First[[ApprovalRequest], ApprovalDecision] = First(
    "approval/ask",
    doc="a call needs the person's approval: the newest approver (a UI's dialog) "
    "decides; none at all is a denial (headless)",
)
PLAN_REVIEW: First[[PlanReview], PlanDecision] = First(
    "plan/review",
    doc="the model presented a plan in plan mode: the newest reviewer (a UI) approves "
    "it (going on in accept-edits or default mode) or sends it back with a note; none "
    "at all leaves the mode as it is (headless)",
)
PERMISSION_MODE_CHANGED: Notify[[PermissionMode]] = Notify(
    "permissions/mode-changed",
    doc="the permission mode changed (the person, a command, an approved plan): the "
    "new mode, for every front end to show",
)
QUESTION_ASK: First[[Sequence[Question], AgentHandle | None], Sequence[Answer] | Dismissed] = First(
    "question/ask",
    subject=lambda questions, agent: agent,
    doc="a tool asks the person questions: the newest answerer (a UI) answers or says "
    "they were dismissed; none at all is an error the model is told (headless)",
)

COMMANDS_SETTLE: Gather[[], None] = Gather(
    "commands/settle",
    doc="a /word names no command yet and is about to be refused: a plugin whose "
    "commands are still coming (an MCP server starting, whose prompts are commands) "
    "returns once they are there or failed",
)

# ---------------------------------------------------------------------- sessions

SESSION_TITLE_NOW: First[[AgentHandle], bool] = First(
    "session/title-now",
    subject=_agent,
    doc="a script wants the idle agent's session titled before it exits (dsh -p "
    "--title): a plugin that titles sessions titles it now, waits for the title and "
    "returns True",
)

# ---------------------------------------------------------------------- dsh doctor

DOCTOR_CHECK: Gather[[DoctorAsk], Sequence[Check]] = Gather(
    "doctor/check",
    doc="`dsh doctor` runs: the checks of what a plugin owns (its endpoint, programs, "
    "servers), each a Check with a fix for a problem; a listener bounds its own waits "
    "by the ask's timeout and returns a failed Check rather than raise",
)

CORE_HOOKS: tuple[Hook, ...] = (
    KERNEL_ERROR,
    AGENT_CREATED,
    AGENT_SESSION_START,
    AGENT_SESSION_END,
    AGENT_STATUS,
    AGENT_ERROR,
    AGENT_DISPOSED,
    AGENT_PROMPT_SUBMIT,
    AGENT_PROMPT_BLOCKED,
    AGENT_PRE_STEP,
    AGENT_REQUEST,
    AGENT_REQUEST_ERROR,
    AGENT_TURN_STOPPING,
    PROMPT_PASTE,
    PROMPT_ATTACH,
    PROMPT_MENTIONS,
    HISTORY_SUMMARISE,
    LLM_STREAM,
    LLM_RETRY,
    SYSTEM_PROMPT_ASSEMBLE,
    TOOL_PRE_EXECUTE,
    TOOL_POST_EXECUTE,
    APPROVAL_ASK,
    PLAN_REVIEW,
    PERMISSION_MODE_CHANGED,
    QUESTION_ASK,
    COMMANDS_SETTLE,
    SESSION_TITLE_NOW,
    DOCTOR_CHECK,
)
"""Every hook point above, for tools that list them (and the test that the plugin
author's guide names each one)."""
