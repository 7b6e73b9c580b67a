"""The events that tell the person about the provider's prompt cache: a request that
cannot reuse the cached prefix of the one before (and why), and a request after an idle
long enough that the provider may have dropped it.

Core types, registered when :mod:`dsh.session` is imported, so every front end (and a
replay) says the same words from the log alone. Each records what reading the prompt
without the cache costs, at the prices of when it was logged.
"""

from __future__ import annotations

from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt

from dsh.llm.prefix import PrefixChange
from dsh.session.events import _core_event
from dsh.wire import Frozen

__all__ = ["CacheIdle", "PrefixChanged", "PromptCost"]


class PromptCost(Frozen):
    """About how many tokens a prompt holds, and what reading them costs without the
    cache and from it (None where the model's price is unknown)."""

    tokens: NonNegativeInt
    uncached: NonNegativeFloat | None = None
    cached: NonNegativeFloat | None = None

    def phrase(self) -> str:
        """``about 84,213 tokens without the cache: about $0.0253 (from the cache,
        $0.0005)``."""
        text = f"about {self.tokens:,} tokens without the cache"
        if self.uncached is not None and self.uncached >= SMALLEST:
            text += f": about {money(self.uncached)}"
            if self.cached is not None:
                cached = (
                    money(self.cached) if self.cached >= SMALLEST else f"under {money(SMALLEST)}"
                )
                text += f" (from the cache, {cached})"
        return text


SMALLEST = 0.0001
"""The least amount of money worth naming (what :func:`money` shows as more than 0)."""


def money(dollars: float) -> str:
    return f"${dollars:.4f}" if dollars < 1 else f"${dollars:.2f}"


class PrefixChanged(Frozen):
    """Logged before a request that does not begin as the one before it did."""

    turn: PositiveInt
    step: PositiveInt
    changes: tuple[PrefixChange, ...]
    kept_messages: NonNegativeInt | None = None
    """When only history changed: how many leading messages still match, whose prefix
    (with the system prompt and tools) the cache still holds. None: nothing matches."""
    cost: PromptCost
    """What is read without the cache: everything, or the messages after the kept ones."""

    def notice(self) -> str:
        """What to tell the person (every front end says the same)."""
        why = "; ".join(change.describe() for change in self.changes)
        if self.kept_messages == 0:
            start = "The prompt cache holds only the system prompt and tools"
        elif self.kept_messages is not None:
            plural = "" if self.kept_messages == 1 else "s"
            start = f"The prompt cache holds only the first {self.kept_messages} message{plural}"
        else:
            start = "The prompt cache starts over"
        return f"{start} ({why}): this request reads {self.cost.phrase()}."


class CacheIdle(Frozen):
    """Logged before the first request after an idle longer than the provider is known
    to keep an unused prefix."""

    turn: PositiveInt
    idle_s: NonNegativeInt
    """Seconds since the session's latest answer."""
    cost: PromptCost

    def notice(self) -> str:
        return (
            f"{idle_words(self.idle_s)} since the last request: the provider may have dropped "
            f"its cached copy of this conversation, so this request may read {self.cost.phrase()}."
        )


def idle_words(seconds: int) -> str:
    """``3 d 4 h``, ``2 h 5 min``, ``45 min``."""
    minutes = seconds // 60
    days, hours = divmod(minutes // 60, 24)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        rest = minutes % 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    return f"{max(1, minutes)} min"


_core_event("request/prefix-changed", PrefixChanged)
_core_event("request/cache-idle", CacheIdle)
