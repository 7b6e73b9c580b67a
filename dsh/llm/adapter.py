"""The adapter seam: what a model-provider plugin implements, and the policies it owns.

An adapter serves one or more provider routes. It streams one attempt per call
(:meth:`LlmAdapter.stream`), resolves exact models (context window, default output
cap, reasoning efforts), and says how its failures are retried and what its models
cost. It fails by raising :class:`~dsh.llm.stream.LlmError` or by finishing with an
error; the LLM service turns the first into the second.
"""

from __future__ import annotations

import datetime
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt

from dsh.llm.request import GenerateOptions, ModelInfo, ResolvedModel
from dsh.llm.stream import LlmError, LlmFailure, StreamChunk, TokenUsage
from dsh.wire import Frozen

RETRYABLE_CODES = frozenset(
    {"EMPTY_RESPONSE", "OVERLOADED", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"}
)


class RetryPolicy(Frozen):
    """How failed attempts are retried: exponential backoff with jitter, bounded."""

    max_retries: NonNegativeInt = 5
    base_delay_ms: PositiveInt = 500
    max_delay_ms: PositiveInt = 10_000
    max_retry_after_ms: PositiveInt = 60_000
    """A provider's ``Retry-After`` is honoured up to this long."""
    jitter: NonNegativeFloat = 0.1
    retryable_codes: frozenset[str] = RETRYABLE_CODES
    retryable_before_content: frozenset[str] = frozenset({"STREAM_CLOSED", "MALFORMED_RESPONSE"})
    """Also retried when no content has arrived yet: a stream that ended, broke or went
    wrong before its first block is an attempt that never started."""

    def delay_ms(self, retry: int, provider_retry_after_ms: int | None, unit: float) -> int:
        """The wait before retry number ``retry`` (1-based). ``unit`` is a random number
        in [0, 1) spreading the jitter."""
        if provider_retry_after_ms is not None:
            return min(provider_retry_after_ms, self.max_retry_after_ms)
        backoff: int = min(self.base_delay_ms * 2 ** (retry - 1), self.max_delay_ms)
        return max(0, round(backoff * (1 + self.jitter * (2 * unit - 1))))


class Price(Frozen):
    """US dollars per million tokens, with an optional off-peak discount."""

    cache_hit: NonNegativeFloat
    cache_miss: NonNegativeFloat
    output: NonNegativeFloat
    cache_write: NonNegativeFloat = 0.0
    off_peak_factor: NonNegativeFloat | None = None
    """Prices are multiplied by this outside ``peak_hours_utc`` (DeepSeek: 0.5)."""
    peak_hours_utc: tuple[tuple[int, int], ...] = ()
    """Half-open ``[start, end)`` hours, UTC."""
    peak_weekdays_only: bool = True
    calendar_utc_offset_hours: float = 0.0
    """The offset from UTC of the calendar that weekdays and ``off_peak_dates`` are
    counted in (a provider in Beijing: 8)."""
    off_peak_dates: tuple[datetime.date, ...] = ()
    """Whole days, in that calendar, that are off peak at every hour (public holidays)."""

    def factor_at(self, moment: datetime.datetime) -> float:
        if self.off_peak_factor is None:
            return 1.0
        utc = moment.astimezone(datetime.UTC)
        local = utc + datetime.timedelta(hours=self.calendar_utc_offset_hours)
        peak = (
            any(start <= utc.hour < end for start, end in self.peak_hours_utc)
            and not (self.peak_weekdays_only and local.weekday() >= 5)
            and local.date() not in self.off_peak_dates
        )
        return 1.0 if peak else self.off_peak_factor

    def cost(self, usage: TokenUsage, moment: datetime.datetime | None = None) -> float:
        """What ``usage`` costs, in US dollars, at ``moment`` (default: now)."""
        base = (
            usage.input_tokens * self.cache_miss
            + (usage.cache_read_tokens or 0) * self.cache_hit
            + (usage.cache_write_tokens or 0) * self.cache_write
            + usage.output_tokens * self.output
        ) / 1_000_000
        return base * self.factor_at(moment or datetime.datetime.now(datetime.UTC))


class CatalogEntry(Frozen):
    """One model of a provider's catalog with what is known of it."""

    model: ResolvedModel
    price: Price | None = None
    offered: bool | None = None
    """Whether the provider offers it (:attr:`ModelInfo.offered`); a legacy id is
    offered when the model it is sent as is."""


class ProviderReply(Frozen):
    """The answer to a request made to a provider's own API beside its models (a web
    search on the same key): the status and the body, parsed when it is JSON."""

    status: int
    body: Any = None
    """The JSON body; None when it was empty or not JSON (``text`` has it)."""
    text: str = ""


_API_PATH = re.compile(r"^[A-Za-z0-9_-]+(?:/[A-Za-z0-9_.-]+)*$")


def api_path(path: str) -> str:
    """``path`` checked as a path below a provider's base URL: plain segments only, so
    a request made with the provider's key can never leave that base (no scheme, no
    host, no ``..``, no query). Raises :class:`LlmError` (``BAD_PATH``) otherwise."""
    if not _API_PATH.match(path) or any(part in (".", "..") for part in path.split("/")):
        raise LlmError(LlmFailure(message=f"not an API path: {path!r}", code="BAD_PATH"))
    return path


class LlmAdapter(ABC):
    """One provider implementation. Subclasses implement :meth:`stream` at least."""

    retry_policy: RetryPolicy = RetryPolicy()

    async def list_models(self, provider: str) -> list[ModelInfo]:
        """The provider's model catalog: advisory, never used to refuse a model id."""
        return []

    def resolve_model(self, provider: str, model: str) -> ResolvedModel:
        """What this adapter knows about one exact model; unknown ids pass through."""
        return ResolvedModel(provider=provider, id=model, name=model)

    def price(self, provider: str, model: str) -> Price | None:
        return None

    @abstractmethod
    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """One attempt at ``options``: chunks ending in exactly one ``finish``."""

    def api_base_url(self, provider: str) -> str | None:
        """The base URL :meth:`post_json` paths are below; None when the adapter makes
        no requests beside its model calls."""
        return None

    async def post_json(
        self, provider: str, path: str, body: Mapping[str, Any], *, timeout_s: float
    ) -> ProviderReply:
        """POST ``body`` to ``path`` (checked by :func:`api_path`) below the provider's
        base URL, with the provider's key, where the key may go. Raises
        :class:`LlmError`: ``UNSUPPORTED`` for an adapter without such requests, the
        key's codes (``MISSING_CREDENTIAL``, ``KEY_WITHHELD``), ``TIMEOUT`` or
        ``TRANSPORT``; an HTTP error status is a reply, not an exception."""
        raise LlmError(
            LlmFailure(message=f"{provider} serves no API beside its models", code="UNSUPPORTED")
        )

    async def aclose(self) -> None:  # noqa: B027 - optional: adapters without connections have nothing to release
        """Release connections; called when the adapter's registration goes."""
