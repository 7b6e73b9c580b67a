"""What a session's model calls and other paid requests used and cost.

Every paid call the log records counts: the agent's own requests (``assistant/message``
with usage) and any other event whose type says it records one (its
:attr:`~dsh.session.events.EventType.paid_call` reader: a plugin's summaries or titles).
So does every paid request that is not a model call (its type's ``paid_request``
reader: a web search billed per request), by its service, at the price it was logged
with. The status bar, ``/cost``, the headless result and the session index all sum them
here (:meth:`Spend.count`), so they cannot disagree.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dsh.llm import TokenUsage
from dsh.session.events import PaidRequest, SessionEvent, event_type

__all__ = [
    "ModelCall",
    "Pricing",
    "RequestTotal",
    "Spend",
    "paid_call",
    "paid_request",
    "session_spend",
]

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
    spec = event_type(event.type)
    if spec is None or spec.paid_call is None or not isinstance(event.data, spec.model):
        return None
    call = spec.paid_call(event.data)
    if call is None:
        return None
    at = datetime.datetime.fromtimestamp(event.time / 1000, datetime.UTC)
    return ModelCall(call.provider, call.model, call.usage, at)


def paid_request(event: SessionEvent) -> PaidRequest | None:
    """The paid request (not a model call) ``event`` records, if it records one."""
    spec = event_type(event.type)
    if spec is None or spec.paid_request is None or not isinstance(event.data, spec.model):
        return None
    return spec.paid_request(event.data)


@dataclass
class RequestTotal:
    """Paid requests of one service: how many, and their cost where known."""

    count: int = 0
    cost: float | None = None


@dataclass
class Spend:
    """Calls counted, their usage summed, other paid requests by service, and the cost
    of it all where a price is known."""

    calls: int = 0
    usage: TokenUsage | None = None
    cost: float | None = None
    requests: dict[str, RequestTotal] = field(default_factory=dict)
    """Paid requests that are not model calls, by service (``web search``)."""
    saved: float | None = None
    """What the provider's prompt cache saved: the calls' cost had their cached input
    been billed as missed, less what they cost; None when no priced call hit it."""

    def to_json(self) -> dict[str, Any]:
        """The totals as JSON (a snapshot keeps them: see :mod:`dsh.session.snapshot`)."""
        return {
            "calls": self.calls,
            "usage": None if self.usage is None else self.usage.model_dump(mode="json"),
            "cost": self.cost,
            "requests": {name: [t.count, t.cost] for name, t in self.requests.items()},
            "saved": self.saved,
        }

    @classmethod
    def from_json(cls, raw: Any) -> Spend:
        """:meth:`to_json`'s totals again; ValueError for anything else."""
        try:
            usage = raw["usage"]
            return cls(
                calls=int(raw["calls"]),
                usage=None if usage is None else TokenUsage.model_validate(usage),
                cost=_optional_float(raw["cost"]),
                requests={
                    str(name): RequestTotal(int(count), _optional_float(cost))
                    for name, (count, cost) in raw["requests"].items()
                },
                saved=_optional_float(raw["saved"]),
            )
        except (KeyError, TypeError, ValidationError) as error:
            raise ValueError(f"not spend totals: {error}") from None

    def add(self, usage: TokenUsage, price: float | None) -> None:
        """Count one call, with its price (None when unknown)."""
        self.calls += 1
        self.usage = usage if self.usage is None else self.usage + usage
        if price is not None:
            self.cost = (self.cost or 0.0) + price

    def _add_saved(self, call: ModelCall, price: float, pricing: Pricing | None) -> None:
        usage = call.usage
        missed = usage.model_copy(
            update={
                "input_tokens": usage.input_tokens + (usage.cache_read_tokens or 0),
                "cache_read_tokens": 0,
            }
        )
        uncached = ModelCall(call.provider, call.model, missed, call.at).price(pricing)
        if uncached is not None:
            self.saved = (self.saved or 0.0) + max(0.0, uncached - price)

    def add_request(self, request: PaidRequest) -> None:
        total = self.requests.setdefault(request.service, RequestTotal())
        total.count += 1
        if request.cost is not None:
            total.cost = (total.cost or 0.0) + request.cost
            self.cost = (self.cost or 0.0) + request.cost

    def count(self, event: SessionEvent, pricing: Pricing | None) -> bool:
        """Count what ``event`` paid for, if anything; whether it paid for something."""
        call = paid_call(event)
        if call is not None:
            price = call.price(pricing)
            self.add(call.usage, price)
            if price is not None and call.usage.cache_read_tokens:
                self._add_saved(call, price, pricing)
            return True
        request = paid_request(event)
        if request is not None:
            self.add_request(request)
            return True
        return False


def session_spend(events: Iterable[SessionEvent], pricing: Pricing | None) -> Spend:
    spend = Spend()
    for event in events:
        spend.count(event, pricing)
    return spend


def _optional_float(value: Any) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not a number")
    return float(value)
