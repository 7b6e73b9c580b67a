"""Every hook point of the core, in one catalogue: name, call style, arguments, result.

This module is public API. A plugin listens with ``ctx.on(SPEC, fn)`` and a type
checker holds ``fn`` to the spec; the core dispatches with the method of the spec's
style (``emit``, ``parallel``, ``serial``, ``waterfall``). The styles, and how a
spec says whose event a dispatch is, are described in :mod:`dsh.kernel` (the
classes :class:`~dsh.kernel.Notify`, :class:`~dsh.kernel.Gather`,
:class:`~dsh.kernel.First`, :class:`~dsh.kernel.Chain`, re-exported here so a
plugin declares hooks of its own with them).

Hooks whose subject is the agent are heard by global listeners for every agent, and
by a listener registered on an agent's own context only for that agent.

Each hook is declared by its own layer, beside the vocabulary it speaks, and only
gathered here: :mod:`dsh.agent.hooks` (the agent and its prompts),
:mod:`dsh.llm.hooks` (model calls), :mod:`dsh.prompt` (the system prompt),
:mod:`dsh.tools.service` (tool calls), :mod:`dsh.tools.approval`,
:mod:`dsh.tools.plan_review` and
:mod:`dsh.tools.questions` (what the person is asked and told), :mod:`dsh.commands`
and :mod:`dsh.doctor`. A module of the core imports a hook from its layer, never from
here: this catalogue imports every layer.
"""

from __future__ import annotations

from dsh.agent.hooks import (
    AGENT_CREATED,
    AGENT_DISPOSED,
    AGENT_ERROR,
    AGENT_PRE_STEP,
    AGENT_PROMPT_BLOCKED,
    AGENT_PROMPT_SUBMIT,
    AGENT_REQUEST,
    AGENT_REQUEST_ERROR,
    AGENT_SESSION_END,
    AGENT_SESSION_START,
    AGENT_STATUS,
    AGENT_TURN_STOPPING,
    HISTORY_SUMMARISE,
    PROMPT_ATTACH,
    PROMPT_MENTIONS,
    PROMPT_PASTE,
    SESSION_TITLE_NOW,
)
from dsh.commands import COMMANDS_SETTLE
from dsh.doctor import DOCTOR_CHECK
from dsh.kernel import KERNEL_ERROR, Chain, First, Gather, Hook, Next, Notify
from dsh.llm.hooks import LLM_RETRY, LLM_STREAM
from dsh.prompt import SYSTEM_PROMPT_ASSEMBLE
from dsh.tools.approval import APPROVAL_ASK, PERMISSION_MODE_CHANGED
from dsh.tools.plan_review import PLAN_REVIEW
from dsh.tools.questions import QUESTION_ASK
from dsh.tools.service import TOOL_ANSWER, TOOL_POST_EXECUTE, TOOL_PRE_EXECUTE

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
    "PROMPT_MENTIONS",
    "PROMPT_PASTE",
    "QUESTION_ASK",
    "SESSION_TITLE_NOW",
    "SYSTEM_PROMPT_ASSEMBLE",
    "TOOL_ANSWER",
    "TOOL_POST_EXECUTE",
    "TOOL_PRE_EXECUTE",
    "Chain",
    "First",
    "Gather",
    "Hook",
    "Next",
    "Notify",
]

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
    TOOL_ANSWER,
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
