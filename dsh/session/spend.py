"""What a session's model calls used and cost.

Every paid call the log records counts: the agent's own requests (``assistant/message``
with usage), the summaries compaction asked for (``compaction/summary``) and the
model's session titles (``session/title``). The
status bar, ``/cost``, the headless result and the session index all sum them here,
so they cannot disagree.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dsh.llm import TokenUsage
from dsh.session.events import (
    AssistantMessageData,
    CompactionSummary,
    SessionEvent,
    SessionTitle,
)

__all__ = ["ModelCall", "Pricing", "Spend", "paid_call", "session_spend"]

Pricing = Callable[[str, str, TokenUsage, datetime.datetime], "float | None"]
"""Cost in US dollars of one call (provider, model, usage, when it was made), or None
when unknown. When matters: DeepSeek charges half off peak hours, and a session
resumed later must cost what it cost then (``LlmService.cost`` fits)."""


@dataclass(frozen=True)
class ModelCall:
    provider: str
    model: str
    usage: TokenUsage
    at: datetime.datetime
    """When the call's answer was logged (UTC)."""

    def price(self, pricing: Pricing | None) -> float | None:
        if pricing is None:
            return None
        return pricing(self.provider, self.model, self.usage, self.at)


def paid_call(event: SessionEvent) -> ModelCall | None:
    """The model call ``event`` records, if it records one with usage."""
    at = datetime.datetime.fromtimestamp(event.time / 1000, datetime.UTC)
    match event.data:
        case AssistantMessageData(message=message, usage=usage) if usage is not None:
            return ModelCall(message.source.provider, message.source.model, usage, at)
        case CompactionSummary(provider=provider, model=model, usage=usage) if usage is not None:
            return ModelCall(provider, model, usage, at)
        case SessionTitle(provider=str(provider), model=str(model), usage=usage) if usage:
            return ModelCall(provider, model, usage, at)
    return None


@dataclass
class Spend:
    """Calls counted, their usage summed, and their cost where a price is known."""

    calls: int = 0
    usage: TokenUsage | None = None
    cost: float | None = None

    def add(self, usage: TokenUsage, price: float | None) -> None:
        """Count one call, with its price (None when unknown)."""
        self.calls += 1
        self.usage = usage if self.usage is None else self.usage + usage
        if price is not None:
            self.cost = (self.cost or 0.0) + price


def session_spend(events: Iterable[SessionEvent], pricing: Pricing | None) -> Spend:
    spend = Spend()
    for event in events:
        call = paid_call(event)
        if call is not None:
            spend.add(call.usage, call.price(pricing))
    return spend
