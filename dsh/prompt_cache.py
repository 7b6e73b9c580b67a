"""The provider's prompt cache, as the person sees it: what the next request's prompt
costs without the cache, and how long the session has been idle.

A provider with a prompt cache (DeepSeek's bills a cached token at a fiftieth of a
miss) reuses the longest prefix a request shares with earlier ones. The loop keeps that
prefix stable (:mod:`dsh.prompt`), says when a request cannot reuse it
(``request/prefix-changed``) and when an idle may have cost it (``request/cache-idle``);
commands that will start it over (switching model, compacting) say beforehand what the
next request will cost without it, with :func:`next_prompt_cost`.

This module is public API.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from dsh.llm import Message, TokenUsage, ToolSchema, header_tokens, messages_tokens
from dsh.session import AssistantMessageData, Pricing, PromptCost, Session, SessionEvent

__all__ = ["latest_answer_ms", "next_prompt_cost", "prompt_cost", "prompt_size", "prompt_tokens"]


def prompt_tokens(
    system: str | None, tools: Sequence[ToolSchema] | None, messages: Sequence[Message]
) -> int:
    """About how many tokens a request with this system prompt, tools and history holds."""
    return header_tokens(system, tools) + messages_tokens(messages)


def prompt_cost(
    tokens: int, pricing: Pricing | None, provider: str, model: str, at: datetime.datetime
) -> PromptCost:
    """What reading ``tokens`` of prompt costs with ``provider/model`` at ``at``: all of
    them missing the cache, and all of them hitting it."""
    if pricing is None:
        return PromptCost(tokens=tokens)
    missed = pricing(provider, model, TokenUsage(input_tokens=tokens, output_tokens=0), at)
    hit = TokenUsage(input_tokens=0, output_tokens=0, cache_read_tokens=tokens)
    return PromptCost(tokens=tokens, uncached=missed, cached=pricing(provider, model, hit, at))


def latest_answer_ms(session: Session) -> int | None:
    """When (epoch ms) the session's latest model answer was logged; None before the
    first."""
    event = _latest_answer(session)
    return None if event is None else event.time


def _latest_answer(session: Session) -> SessionEvent | None:
    # Read from the end of the log: a turn's last answer is near it.
    events = session.events
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index].data, AssistantMessageData):
            return events[index]
    return None


def next_prompt_cost(
    session: Session, pricing: Pricing | None, provider: str, model: str
) -> PromptCost | None:
    """What the session's next request would read without the cache (with the system
    prompt and tools of its latest request and the history as it stands), priced for
    ``provider/model``; None when no request was answered yet, so nothing is cached to
    lose."""
    header = session.request_header()
    if header is None or _latest_answer(session) is None:
        return None
    tokens = prompt_size(session, header.system, header.tools, session.derive_messages())
    return prompt_cost(tokens, pricing, provider, model, datetime.datetime.now(datetime.UTC))


def prompt_size(
    session: Session,
    system: str | None,
    tools: Sequence[ToolSchema] | None,
    messages: Sequence[Message],
) -> int:
    """About how many tokens a request of ``session`` holds: when ``messages`` still
    hold the latest answer, what the provider counted for that answer's request and the
    answer, plus an estimate of what came after it (an estimate alone can be off by
    half); else an estimate of it all."""
    answer = _latest_answer(session)
    if answer is not None:
        assert isinstance(answer.data, AssistantMessageData)
        usage = answer.data.usage
        # Only the last few messages can follow the latest answer: a step's results.
        for index in range(len(messages) - 1, max(-1, len(messages) - 65), -1):
            if usage is not None and messages[index] == answer.data.message:
                counted = usage.billed_input_tokens + usage.output_tokens
                return counted + messages_tokens(messages[index + 1 :])
    return prompt_tokens(system, tools, messages)
