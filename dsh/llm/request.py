"""What a model call asks for, and what an adapter says about a model.

:class:`GenerateOptions` is one fully assembled request. :class:`LlmCallConfig` is its
provider / model / effort / sampling subset, which the session log records in every
request header so that each request can be rebuilt from the log alone.
"""

from __future__ import annotations

from typing import Any, Literal, NewType

from pydantic import Field, PositiveInt

from dsh.llm.ids import SessionId
from dsh.llm.messages import Message
from dsh.wire import Frozen

Purpose = NewType("Purpose", str)
"""What a call beside the conversation is for (a summary, a title): a value the plugin
making the call declares, ``Purpose("my-plugin-summary")``. A conversation's own
requests have none. Adapters may tune a call by it; the core names none."""


class ToolSchema(Frozen):
    """A tool as the model sees it: name, description and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class LlmCallConfig(Frozen):
    """Provider, model, reasoning effort and sampling of one conversation's requests."""

    provider: str
    model: str
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: PositiveInt | None = None
    stop: tuple[str, ...] | None = None


class AdapterDefaults(Frozen):
    """Which fields of a call config the adapter filled in, rather than the caller."""

    reasoning_effort: Literal[True] | None = None
    max_tokens: Literal[True] | None = None


class GenerateOptions(Frozen):
    """One model request, fully assembled."""

    provider: str
    model: str
    messages: tuple[Message, ...]
    reasoning_effort: str | None = None
    system: str | None = None
    tools: tuple[ToolSchema, ...] | None = None
    temperature: float | None = None
    max_tokens: PositiveInt | None = None
    stop: tuple[str, ...] | None = None
    session_id: SessionId | None = None
    purpose: Purpose | None = None
    signal: Any = Field(default=None, exclude=True)
    """A cancellation signal the adapter watches; never serialized."""

    @property
    def call_config(self) -> LlmCallConfig:
        return LlmCallConfig(
            provider=self.provider,
            model=self.model,
            reasoning_effort=self.reasoning_effort,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            stop=self.stop,
        )


class ModelInfo(Frozen):
    """One entry of a provider's advisory model catalog."""

    provider: str
    id: str
    name: str
    description: str | None = None
    offered: bool | None = None
    """Whether the provider's own listing (``/models``) has it: False for a model only
    dsh's settings or plugin know; None when no listing could be read."""


class ReasoningEffortInfo(Frozen):
    id: str
    name: str
    description: str | None = None


class ModelReasoning(Frozen):
    """The reasoning efforts a model accepts, in display order, and the default one."""

    efforts: tuple[ReasoningEffortInfo, ...]
    default_effort: str | None = None

    def accepts(self, effort: str) -> bool:
        return any(info.id == effort for info in self.efforts)


class ResolvedModel(ModelInfo):
    """What the adapter serving one exact provider/model route knows about it."""

    context_window: PositiveInt | None = None
    default_max_tokens: PositiveInt | None = None
    reasoning: ModelReasoning | None = None
    vision: bool | None = None
    """Whether the model takes images; ``None`` when the adapter does not say."""
    sent_as: str | None = None
    """The id the adapter sends instead (a legacy id mapped to its successor)."""
    concurrency: PositiveInt | None = None
    """Requests the provider serves at once per account, where it publishes a limit."""
    cache_idle_s: PositiveInt | None = None
    """After this many idle seconds the provider may have dropped the cached prompt
    prefix (as far as it says): the next request is then said to perhaps cost more."""
