"""The agent's hook points: its life, its prompts and turns, what its front end's
prompt asks of plugins, and its history being summarised.

Re-exported by :mod:`dsh.hooks`, the catalogue of every core hook; declared here, beside
the vocabulary they speak, so that the agent loop, which dispatches most of them, and a
reader looking for their signatures need nothing above the agent layer.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from dsh.agent_handle import AgentHandle, Status
from dsh.kernel import Chain, First, Gather, Notify
from dsh.llm import LlmCallConfig, UserMessage

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
    "HISTORY_SUMMARISE",
    "PROMPT_ATTACH",
    "PROMPT_MENTIONS",
    "PROMPT_PASTE",
    "SESSION_TITLE_NOW",
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

SESSION_TITLE_NOW: First[[AgentHandle], bool] = First(
    "session/title-now",
    subject=_agent,
    doc="a script wants the idle agent's session titled before it exits (dsh -p "
    "--title): a plugin that titles sessions titles it now, waits for the title and "
    "returns True",
)
