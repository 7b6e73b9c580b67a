"""How big the context is: estimates calibrated by what the provider last reported.

An estimate (:mod:`dsh.llm.tokens`) is about four characters a token, plus a few
tokens for each block and message. It is only a guess, so whenever the latest request
reported its usage, the estimate of what that request held is scaled
to the real figure, and the same scale is applied to what was added since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsh.llm import header_tokens, message_tokens
from dsh.session import (
    AssistantMessageData,
    EpochHeader,
    ReplaceOp,
    SessionEvent,
    event_message,
)

MIN_RATIO, MAX_RATIO = 0.25, 4.0
"""Bounds of the calibration, so one odd usage report cannot throw everything off."""


def epoch_tokens(header: EpochHeader | None) -> int:
    return header_tokens(header.system, header.tools) if header is not None else 0


@dataclass(frozen=True)
class Measure:
    """The surface as it stands, measured."""

    nodes: tuple[int, ...]
    """The surface nodes (seqs), in order."""
    estimates: tuple[int, ...]
    """The raw estimate of each node's message (0 for a node that yields none)."""
    header: int
    """The raw estimate of the system prompt and tools."""
    ratio: float
    """Real tokens per estimated token, from the latest usage report (1 without one)."""
    total: int
    """The context the next request would hold, in real tokens as far as known."""
    reported: bool
    """Whether ``total`` rests on a usage report rather than the estimate alone."""

    def scaled(self, estimate: int) -> int:
        return round(estimate * self.ratio)


def measure(
    events: Sequence[SessionEvent],
    nodes: Sequence[int],
    header: EpochHeader | None,
    sizes: dict[int, int] | None = None,
) -> Measure:
    """The size of the context made of ``nodes``: the latest usage report on the surface
    (input and output: the answer is history now), plus what was added after it.
    ``sizes`` caches node estimates by seq (events never change)."""
    cache = sizes if sizes is not None else {}
    estimates = tuple(
        cache[seq] if seq in cache else cache.setdefault(seq, _node_tokens(events[seq]))
        for seq in nodes
    )
    fixed = epoch_tokens(header)
    # A report from before the latest compaction measured the history it replaced (an
    # answer kept verbatim after it still carries the usage of its own, longer request).
    floor = max((seq for seq in nodes if isinstance(events[seq].surface_op, ReplaceOp)), default=-1)
    for index in range(len(nodes) - 1, -1, -1):
        data = events[nodes[index]].data
        if nodes[index] < floor:
            continue
        if isinstance(data, AssistantMessageData) and data.usage is not None:
            usage = data.usage
            actual = usage.billed_input_tokens + usage.output_tokens
            estimated = fixed + sum(estimates[: index + 1])
            ratio = min(MAX_RATIO, max(MIN_RATIO, actual / estimated)) if estimated else 1.0
            since = sum(estimates[index + 1 :])
            total = actual + round(since * ratio)
            return Measure(tuple(nodes), estimates, fixed, ratio, total, True)
    total = fixed + sum(estimates)
    return Measure(tuple(nodes), estimates, fixed, 1.0, total, False)


def _node_tokens(event: SessionEvent) -> int:
    message = event_message(event)
    return message_tokens(message) if message is not None else 0
