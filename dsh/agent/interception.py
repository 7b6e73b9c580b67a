"""The decisions plugins return at the loop's interception points.

- ``agent/prompt-submit`` (waterfall, before a turn opens): :class:`PromptAllow`, which
  may rewrite the prompt and add context, or :class:`PromptBlock`, which drops it with
  a reason and opens no turn.
- ``agent/pre-step`` (waterfall, before each step): :class:`Enter` the messages that
  begin the step, or :class:`Reject` the turn (it ends ``blocked``).
- ``agent/request`` (waterfall): the :class:`~dsh.llm.LlmCallConfig` of the next request;
  a listener may switch provider, model, effort or sampling.
- ``agent/request-error`` (waterfall, after a request failed for good): :class:`Retry`
  repeats the request within the same step; the default ends the turn with the error.
- ``agent/turn-stopping`` (serial): the turn is about to end; ``agent.steer(...)``
  from a listener keeps it going.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from dsh.agent_handle import AgentHandle
from dsh.llm import Block, LlmFailure, RetryPolicy, UserMessage

PROMPT_SUBMIT = "agent/prompt-submit"
PRE_STEP = "agent/pre-step"
REQUEST = "agent/request"
REQUEST_ERROR = "agent/request-error"
TURN_STOPPING = "agent/turn-stopping"
SESSION_START = "agent/session-start"
STATUS = "agent/status"
CREATED = "agent/created"
DISPOSED = "agent/disposed"
ERROR = "agent/error"
PROMPT_BLOCKED = "agent/prompt-blocked"


@dataclass(frozen=True)
class PromptAllow:
    content: tuple[Block, ...] | None = None
    """Replaces the prompt's content when given."""
    additional_contexts: tuple[UserMessage, ...] = ()


@dataclass(frozen=True)
class PromptBlock:
    reason: str


PromptDecision = PromptAllow | PromptBlock


@dataclass(frozen=True)
class PreStep:
    agent: AgentHandle
    claimed: tuple[UserMessage, ...]
    turn: int
    step: int
    signal: asyncio.Event


@dataclass(frozen=True)
class Enter:
    messages: tuple[UserMessage, ...]


@dataclass(frozen=True)
class Reject:
    reason: str = ""


PreStepDecision = Enter | Reject


@dataclass(frozen=True)
class RequestError:
    agent: AgentHandle
    turn: int
    step: int
    provider: str
    failure: LlmFailure
    retry_policy: RetryPolicy
    signal: asyncio.Event


@dataclass(frozen=True)
class Retry:
    """Returned from ``agent/request-error``: send the request again, same step."""
