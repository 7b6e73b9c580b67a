"""What a chat-completions provider knows about its models.

:class:`ChatModel` holds one model's facts (context window, output cap, the thinking
switch and efforts, reasoning replay, price, vision, the id sent instead), as a
provider plugin's table or the settings give them, and resolves to the
:class:`~dsh.llm.ResolvedModel` dsh shows and plans with.

Part of the chat-completions library (see :mod:`dsh_plugins._shared.chat_completions`).
"""

from __future__ import annotations

from pydantic import PositiveInt

from dsh.llm import (
    ModelReasoning,
    Price,
    ReasoningEffortInfo,
    ResolvedModel,
)
from dsh.wire import Frozen

EFFORT_NAMES = {"off": "Off", "low": "Low", "medium": "Medium", "high": "High", "max": "Max"}


class ChatModel(Frozen):
    """What a provider plugin knows (or is told in settings) about one model."""

    name: str | None = None
    context_window: PositiveInt | None = None
    max_output_tokens: PositiveInt | None = None
    """The output cap sent when a request sets none."""
    thinking: bool = False
    """The server takes DeepSeek's ``thinking: {type: enabled|disabled}`` switch."""
    efforts: tuple[str, ...] = ()
    """Reasoning efforts accepted; ``off`` turns thinking off."""
    default_effort: str | None = None
    replay_reasoning: bool = True
    """Send earlier reasoning back as ``reasoning_content``: on every assistant message
    whose answer carried reasoning, and (empty when there was none) on every assistant
    message of a request in thinking mode, as DeepSeek's thinking mode requires. Off
    for a server that rejects the field; the provider's own setting can turn it off
    for all its models."""
    price: Price | None = None
    sent_as: str | None = None
    """The id sent to the server instead of the one asked for (a legacy id the
    provider now serves under another name)."""
    vision: bool = False
    """The model takes images (``image_url`` blocks)."""
    concurrency: PositiveInt | None = None
    """Requests the provider serves at once for one key, where it publishes a limit."""
    cache_idle_s: PositiveInt | None = None
    """Idle seconds after which the provider may have dropped a cached prompt prefix."""

    def merged(self, override: ChatModel) -> ChatModel:
        """This model with every field ``override`` sets explicitly replaced."""
        return self.model_copy(update=override.model_dump(exclude_unset=True, by_alias=False))

    def resolved(self, provider: str, model: str) -> ResolvedModel:
        reasoning = None
        if self.efforts:
            reasoning = ModelReasoning(
                efforts=tuple(
                    ReasoningEffortInfo(id=e, name=EFFORT_NAMES.get(e, e.title()))
                    for e in self.efforts
                ),
                default_effort=self.default_effort,
            )
        return ResolvedModel(
            provider=provider,
            id=model,
            name=self.name or model,
            context_window=self.context_window,
            default_max_tokens=self.max_output_tokens,
            reasoning=reasoning,
            vision=self.vision,
            sent_as=self.sent_as,
            concurrency=self.concurrency,
            cache_idle_s=self.cache_idle_s,
        )
