"""What the loop tells the person about the provider's prompt cache, request by request.

Each request should begin with every byte of the one before (:mod:`dsh.prompt` keeps
the system prompt and the tools stable; history only grows). When one does not (the
model switched, a compaction or a rewind rewrote history, an MCP server's tools
changed, plan mode added its section), the request is preceded by a
``request/prefix-changed`` event naming what changed and what reading the prompt
without the cache costs; when the session was idle longer than the provider is known
to keep a cached prefix, by a ``request/cache-idle`` event.
"""

from __future__ import annotations

import datetime

from dsh.llm import (
    GenerateOptions,
    ResolvedModel,
    first_difference,
    messages_tokens,
    prefix_changes,
)
from dsh.prompt_cache import latest_answer_ms, prompt_cost, prompt_size
from dsh.session import CacheIdle, EpochHeader, PrefixChanged, Pricing, Session

__all__ = ["CacheWatch"]


class CacheWatch:
    """One agent's previous request in this process; see the module docstring."""

    def __init__(self) -> None:
        self._last: GenerateOptions | None = None

    def before_request(
        self,
        session: Session,
        options: GenerateOptions,
        *,
        turn: int,
        step: int,
        model: ResolvedModel,
        pricing: Pricing | None,
        logged: EpochHeader | None,
    ) -> None:
        """Log what the person should know before ``options`` is sent. ``logged`` is
        the request header the log held before this request's, which stands in for the
        previous request at the first request of this process (a resumed session)."""
        last, self._last = self._last, options.model_copy(update={"signal": None})
        answered = latest_answer_ms(session)
        if answered is None:
            return  # nothing was cached yet
        now = datetime.datetime.now(datetime.UTC)
        if last is None and logged is not None:
            last = GenerateOptions.model_construct(
                provider=logged.config.provider,
                model=logged.config.model,
                system=logged.system,
                tools=logged.tools,
                messages=options.messages,
            )
        changes = prefix_changes(last, options) if last is not None else ()
        idle_s = int(now.timestamp() - answered / 1000)
        stale = model.cache_idle_s is not None and idle_s > model.cache_idle_s
        if not changes and not stale:
            return
        kept = None
        if changes and all(change.part == "history" for change in changes) and last is not None:
            # The head and the messages before the first one changed are still cached.
            kept = first_difference(last.messages, options.messages)
        if kept is not None:
            tokens = messages_tokens(options.messages[kept:])
        else:
            tokens = prompt_size(session, options.system, options.tools, options.messages)
        cost = prompt_cost(tokens, pricing, options.provider, options.model, now)
        if changes:
            session.append(
                "request/prefix-changed",
                PrefixChanged(turn=turn, step=step, changes=changes, kept_messages=kept, cost=cost),
            )
        elif stale:
            # After a change the prompt is read uncached anyway: one notice says so.
            session.append("request/cache-idle", CacheIdle(turn=turn, idle_s=idle_s, cost=cost))
