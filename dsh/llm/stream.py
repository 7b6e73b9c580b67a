"""The streaming protocol between a model adapter and the agent loop.

An adapter answers one request with a stream of :data:`StreamChunk` values:

- ``block-start`` opens block ``index`` of a given type;
- ``text-delta`` / ``reasoning-delta`` / ``tool-call-delta`` extend an open block;
- ``block-end`` closes it, carrying the whole block (equal to its deltas joined);
- ``usage`` reports token counts, before ``finish``;
- ``finish`` is always last and says why the model stopped.

The chunk union is closed. Finish reasons are open: adapters may add kinds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, NonNegativeInt

from dsh.llm.blocks import ContentBlock
from dsh.llm.ids import CallId
from dsh.wire import Frozen, Opaque, TaggedUnion

BlockType = Literal["text", "reasoning", "tool-call"]


class TokenUsage(Frozen):
    """Token counts of one model call. The input fields are disjoint: ``input_tokens``
    counts only uncached input; reasoning tokens are part of ``output_tokens``."""

    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    cache_read_tokens: NonNegativeInt | None = None
    cache_write_tokens: NonNegativeInt | None = None
    reasoning_tokens: NonNegativeInt | None = None

    @property
    def billed_input_tokens(self) -> int:
        return self.input_tokens + (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)

    @property
    def total_tokens(self) -> int:
        return self.billed_input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=add(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=add(self.cache_write_tokens, other.cache_write_tokens),
            reasoning_tokens=add(self.reasoning_tokens, other.reasoning_tokens),
        )


class LlmFailure(Frozen):
    """Why a model call failed, in a form that can be logged and shown.

    ``code`` is machine-routable (``AUTH``, ``RATE_LIMIT``, ``SERVER``, ``OVERLOADED``
    (the server is short of capacity: retried), ``CONTENT_FILTER`` (the provider's
    filter stopped the answer: not retried), ``TIMEOUT``, ``TRANSPORT``,
    ``CONTEXT_WINDOW_EXCEEDED``, ``MALFORMED_RESPONSE``...).
    """

    message: str
    code: str
    status: int | None = None
    provider_retry_after_ms: NonNegativeInt | None = None
    """How long the provider asked us to wait before retrying (``Retry-After``)."""
    reset_at_ms: NonNegativeInt | None = None
    """When the provider says its rate limit resets (epoch ms), if it says."""
    request_id: str | None = None


class LlmError(Exception):
    """A model call failed; ``failure`` says how."""

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure

    @property
    def code(self) -> str:
        return self.failure.code


# ---------------------------------------------------------------------- finish reasons


class Finished(Frozen):
    """Base of every finish reason."""

    kind: str


class UnknownFinish(Finished, Opaque):
    """A finish reason this process does not know."""


finish_reasons: TaggedUnion[Finished] = TaggedUnion(
    "finish reason", Finished, "kind", UnknownFinish
)
FinishReason: TypeAlias = Annotated[Finished, finish_reasons.validator, finish_reasons.serializer]


@finish_reasons.member
class FinishStop(Finished):
    kind: Literal["stop"] = "stop"


@finish_reasons.member
class FinishToolCalls(Finished):
    kind: Literal["tool-calls"] = "tool-calls"


@finish_reasons.member
class FinishMaxTokens(Finished):
    kind: Literal["max-tokens"] = "max-tokens"


@finish_reasons.member
class FinishRefusal(Finished):
    """The model declined to answer; its refusal is the answer's text."""

    kind: Literal["refusal"] = "refusal"


@finish_reasons.member
class FinishAborted(Finished):
    kind: Literal["aborted"] = "aborted"
    failure: LlmFailure


@finish_reasons.member
class FinishError(Finished):
    kind: Literal["error"] = "error"
    failure: LlmFailure


# ---------------------------------------------------------------------- chunks


class BlockStart(Frozen):
    type: Literal["block-start"] = "block-start"
    index: NonNegativeInt
    block_type: BlockType


class TextDelta(Frozen):
    type: Literal["text-delta"] = "text-delta"
    index: NonNegativeInt
    text: str


class ReasoningDelta(Frozen):
    type: Literal["reasoning-delta"] = "reasoning-delta"
    index: NonNegativeInt
    text: str


class ToolCallDelta(Frozen):
    type: Literal["tool-call-delta"] = "tool-call-delta"
    index: NonNegativeInt
    id: CallId
    name: str | None = None
    arguments_delta: str = ""


class BlockEnd(Frozen):
    type: Literal["block-end"] = "block-end"
    index: NonNegativeInt
    block: ContentBlock


class UsageChunk(Frozen):
    type: Literal["usage"] = "usage"
    usage: TokenUsage


class Finish(Frozen):
    type: Literal["finish"] = "finish"
    reason: FinishReason
    replay_state: Any = None


StreamChunk = Annotated[
    BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish,
    Field(discriminator="type"),
]
"""One message of the streaming protocol; a closed union tagged by ``type``."""
