"""The model call's hook points, and the notice one of them carries.

Re-exported by :mod:`dsh.hooks`, the catalogue of every core hook; declared here, beside
the vocabulary they speak, so that :mod:`dsh.llm.service`, which dispatches them, and a
reader looking for their signatures need nothing above the LLM layer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from dsh.kernel import Chain, Notify
from dsh.llm.request import GenerateOptions
from dsh.llm.stream import LlmFailure, StreamChunk
from dsh.wire import Frozen

__all__ = ["LLM_RETRY", "LLM_STREAM", "RetryNotice"]


class RetryNotice(Frozen):
    """A failed attempt about to be retried: what the UI shows while it waits."""

    provider: str
    model: str
    retry: int
    max_retries: int
    delay_ms: int
    failure: LlmFailure


LLM_STREAM: Chain[GenerateOptions, AsyncIterator[StreamChunk]] = Chain(
    "llm/stream",
    doc="one attempt at a model call: the chunks (wrap them, or change the options)",
)
LLM_RETRY: Notify[[RetryNotice]] = Notify(
    "llm/retry", doc="a failed attempt will be retried after a delay"
)
