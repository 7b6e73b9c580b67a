"""The ``[plugins.compaction]`` settings."""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt, model_validator


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    auto: bool = True
    """Compact by itself when the context fills up (``/compact`` works either way)."""
    threshold: float = Field(default=0.85, gt=0, le=1)
    """How full the model's own context window may get, as a fraction of it, before the
    history is compacted ahead of the next request."""
    keep: float = Field(default=0.15, gt=0, lt=1)
    """How much of the window the most recent history kept verbatim may take, as a
    fraction of it: whole recent turns while they fit, else the latest steps."""
    provider: str | None = None
    """The provider route of summary requests; the conversation's own when unset."""
    model: str | None = None
    """The model of summary requests; the conversation's own when unset."""
    reasoning_effort: str | None = None
    """The effort of summary requests; the conversation's own when unset."""
    min_answer_tokens: PositiveInt = 8_192
    """The smallest output cap a conversation request is sent with. A model's window
    counts the prompt and the answer's cap together (DeepSeek refuses a request whose
    prompt plus ``max_tokens`` exceeds it), so a cap that would not fit is lowered to
    what does, down to this (or a tenth of the window, if less); below it, the
    history is compacted first (when ``auto``)."""
    max_tokens: PositiveInt = 16_000
    """The most a summary may take (less when the model's window is small)."""
    timeout_s: PositiveFloat = 600.0
    """How long a summary request may take before the compaction is given up."""

    @model_validator(mode="after")
    def _keep_below_threshold(self) -> Config:
        if self.keep >= self.threshold:
            raise ValueError("keep must be smaller than threshold")
        return self
