"""What the status line says of a session: its state, model, spend and context, and
a failed request's wait for its retry.

:class:`~dsh.ui.entries.TranscriptFold` keeps one :class:`Status` up to date from the
session's events; the front ends draw it (:func:`dsh.ui.render.render_status`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh.control_chars import visible
from dsh.llm import TokenUsage
from dsh.session import SessionEvent
from dsh.session.payloads import LlmRetry

State = str
"""``idle``, ``thinking``, ``answering``, ``running-tool``, ``waiting-for-you``,
``retrying`` (a model request failed and is tried again), or an
activity a plugin's fold step names (:meth:`dsh.transcript.Transcript.set_activity`)."""


FAILURE_WORDS = {
    "RATE_LIMIT": "rate limited",
    "SERVER": "server error",
    "OVERLOADED": "overloaded",
    "TIMEOUT": "timed out",
    "TRANSPORT": "connection failed",
    "STREAM_CLOSED": "stream cut",
}
"""How the status bar names a failure being retried (else its code, in lower case)."""


@dataclass(frozen=True)
class RetryStatus:
    """A failed model request waiting to be tried again: which retry, of how many,
    when it starts (epoch ms) and why."""

    retry: int
    max_retries: int
    at_ms: int
    reason: str

    @classmethod
    def of(cls, event: SessionEvent, data: LlmRetry) -> RetryStatus:
        failure = data.failure
        words = FAILURE_WORDS.get(failure.code, failure.code.lower().replace("_", " "))
        reason = f"{failure.status} {words}" if failure.status else words
        return cls(data.retry, data.max_retries, event.time + data.delay_ms, visible(reason))

    def label(self, now_ms: int) -> str:
        """``retrying in 4 s (2/5): 429 rate limited``, then, once the wait is over and
        the attempt runs, ``retrying (2/5): 429 rate limited``."""
        left = -(-(self.at_ms - now_ms) // 1000)  # whole seconds, rounded up
        when = f" in {left} s" if left > 0 else ""
        return f"retrying{when} ({self.retry}/{self.max_retries}): {self.reason}"


@dataclass
class Status:
    title: str | None = None
    provider: str | None = None
    model: str | None = None
    state: State = "idle"
    tool: str | None = None
    usage: TokenUsage | None = None
    """Every call of the session, summed."""
    cost: float | None = None
    cache_saved: float | None = None
    """What the prompt cache saved this session (see :attr:`Spend.saved`)."""
    context_tokens: int | None = None
    """What the latest request put in front of the model."""
    context_window: int | None = None
    retry: RetryStatus | None = None
    """While ``state`` is ``retrying``: the retry it waits for."""

    @property
    def context_ratio(self) -> float | None:
        if not self.context_tokens or not self.context_window:
            return None
        return self.context_tokens / self.context_window

    @property
    def cache_hit_ratio(self) -> float | None:
        usage = self.usage
        if usage is None or usage.cache_read_tokens is None or not usage.billed_input_tokens:
            return None
        return usage.cache_read_tokens / usage.billed_input_tokens
