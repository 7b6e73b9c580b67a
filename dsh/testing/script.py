"""The script of a :class:`~dsh.testing.fake_llm.FakeLLM`: what it answers, in order.

A :class:`Script` holds the :class:`Reply` to each chat request (text, reasoning and
:class:`ToolCallSpec` tool calls, the :class:`Usage` to report, or a :class:`Fault` to
answer instead), the models ``GET /models`` lists and the API key requests must carry.
Scripts mirror the OpenAI wire and validate strictly; :func:`load_script` reads one
from a JSON file. See docs/plugins.md for the format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

JsonObject: TypeAlias = dict[str, Any]

DEFAULT_MODELS = ("deepseek-flash", "deepseek-v4-pro")


class _ScriptModel(BaseModel):
    # Scripts mirror the OpenAI wire, so they keep its snake_case names rather than
    # dsh's camelCase; unknown fields fail, so a typo is an error instead of a default.
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCallSpec(_ScriptModel):
    """One tool call of a reply. A dict ``arguments`` is sent as its JSON; a string is
    sent verbatim, so a test can send arguments that are not valid JSON."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None
    """Default: ``call_<index>_<random hex>``, shaped like DeepSeek's ``call_00_...``."""

    @property
    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class Usage(_ScriptModel):
    """Token counts reported for a reply, mapped onto DeepSeek's usage fields."""

    prompt_tokens: NonNegativeInt
    completion_tokens: NonNegativeInt
    cache_hit_tokens: NonNegativeInt = 0
    """Sent as ``prompt_cache_hit_tokens`` and ``prompt_tokens_details.cached_tokens``."""
    reasoning_tokens: NonNegativeInt | None = None
    """Sent as ``completion_tokens_details.reasoning_tokens``; left out when None."""

    @model_validator(mode="after")
    def _parts_fit_their_totals(self) -> Usage:
        if self.cache_hit_tokens > self.prompt_tokens:
            raise ValueError("cache_hit_tokens cannot exceed prompt_tokens")
        if self.reasoning_tokens is not None and self.reasoning_tokens > self.completion_tokens:
            raise ValueError("reasoning_tokens cannot exceed completion_tokens")
        return self

    def to_wire(self) -> JsonObject:
        """DeepSeek's usage object, in its field order."""
        wire: JsonObject = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cache_hit_tokens},
        }
        if self.reasoning_tokens is not None:
            wire["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        wire["prompt_cache_hit_tokens"] = self.cache_hit_tokens
        wire["prompt_cache_miss_tokens"] = self.prompt_tokens - self.cache_hit_tokens
        return wire


class Fault(_ScriptModel):
    """An HTTP error answered instead of a completion."""

    status: int = Field(ge=200, le=599)
    body: dict[str, Any] | str | None = None
    """A dict is sent as JSON, a string verbatim (as ``text/plain`` unless ``headers``
    say otherwise); None sends DeepSeek's error object for ``status``."""
    retry_after: NonNegativeFloat | None = None
    """Sent as a ``Retry-After`` header, in seconds."""
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers_fit_http(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            _check_header(name, value)
        return headers


class Reply(_ScriptModel):
    """The answer to one chat request.

    Events are the ``data:`` lines of the stream, counted from 0, including the
    malformed line and ``[DONE]``. ``keepalive`` comments are not events.
    """

    reasoning: str = ""
    text: str = ""
    refusal: str = ""
    """Streamed as ``refusal`` deltas after the text, as OpenAI-compatible servers
    decline; a non-streaming answer carries it as the message's ``refusal``."""
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None
    """Default: ``tool_calls`` when there are tool calls, else ``stop``."""
    usage: Usage | None = None
    """Default: estimated from the sizes of the request and the reply."""
    chunk_size: PositiveInt = 4
    """Characters per delta."""
    chunk_delay_ms: NonNegativeFloat = 0
    """Pause between stream writes."""
    first_byte_delay_ms: NonNegativeFloat = 0
    """Pause before the response headers."""
    fault: Fault | None = None
    """Answer with this error instead; the options below are then unused."""
    cut_after: NonNegativeInt | None = None
    """Close the connection after this many events, without the terminating chunk (a
    non-streaming answer is cut halfway through its body instead)."""
    malformed_at: NonNegativeInt | None = None
    """Insert ``data: {this is not json`` as event number N (at most just before
    ``[DONE]``). A non-streaming answer becomes that text."""
    keepalive: bool = False
    """Send a ``: keep-alive`` comment before the first event."""
    first_event_delay_ms: NonNegativeFloat = 0
    """Pause after the response headers, before the first event: a request waiting to
    be scheduled (DeepSeek sends ``: keep-alive`` comments meanwhile, see
    ``keepalive_interval_ms``)."""
    hold_after: NonNegativeInt | None = None
    """Send this many events, then hold the connection open, sending nothing more (but
    keep-alive comments, with ``keepalive_interval_ms``) until the client leaves: 0 is
    the headers alone; the number of ``[DONE]`` is a whole answer, final chunk and
    usage included, whose stream never ends."""
    keepalive_interval_ms: PositiveFloat | None = None
    """While the reply waits before its first event or holds, a ``: keep-alive``
    comment this often."""
    model: str | None = None
    """The model named in the answer. Default: the one the request asked for."""
    gate: str | None = None
    """Hold the answer (before its headers) until the test opens the gate of this name
    with :meth:`FakeLLM.open_gate` (a gate opened earlier does not hold it): for a
    test that needs a request in flight, for as long as it needs, without a guess at
    how long that is."""
    when: str | None = None
    """Answer only a request one of whose user messages contains this text: each request
    takes the first reply left whose ``when`` it matches or that has none. For requests
    that race (subagents asking side by side), so each gets its own answer."""
    events: list[JsonObject | str] | None = None
    """The stream's ``data:`` events as given, instead of a rendering of the fields
    above: an object is sent as its compact JSON, a string verbatim (``"[DONE]"``).
    Nothing is added (no role chunk, no usage, no ``[DONE]`` unless listed), so a test
    can send a stream exactly as a server was recorded sending it. The answer is an
    event stream even to a request that did not ask for one; ``cut_after``,
    ``malformed_at``, ``hold_after`` and the delays still apply."""

    @model_validator(mode="after")
    def _events_stand_alone(self) -> Reply:
        if self.events is not None:
            rendered = ("reasoning", "text", "refusal", "tool_calls", "finish_reason", "usage")
            given = [name for name in rendered if name in self.model_fields_set]
            if given:
                raise ValueError(
                    f"events are sent as given: {', '.join(given)} cannot go with them"
                )
        return self

    @property
    def resolved_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


class SearchResult(_ScriptModel):
    """One result of DeepSeek's web search (``POST /v1/tools/search``)."""

    title: str
    url: str
    snippet: str = ""
    summary: str = ""
    content: str | None = None
    """Sent only when the request asks for ``need_content``."""
    date: str | None = None
    authority: float | None = None
    rerank_score: float | None = None
    site_name: str | None = None


class Page(_ScriptModel):
    """What DeepSeek's fetch (``POST /v1/tools/fetch``) answers for one URL."""

    title: str = ""
    content: str
    """The page as Markdown."""


class Script(_ScriptModel):
    """What a :class:`FakeLLM` answers. A JSON list validates as just the replies."""

    replies: list[Reply] = Field(default_factory=list)
    models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS))
    """Listed by ``GET /models``."""
    require_key: str | None = None
    """When set, requests must carry ``Authorization: Bearer <key>`` or get a 401."""
    search_results: list[SearchResult] = Field(default_factory=list)
    """What every web search answers (at most its ``count``); none: no results."""
    pages: dict[str, Page] = Field(default_factory=dict)
    """What a web fetch of each URL answers; any other URL: a 404."""
    keep_alive: bool = True
    """False: every response says ``Connection: close`` and its connection closes after
    it, as some servers and proxies do; the client connects anew for each request."""
    prompt_cache: bool = False
    """True: a reply with no ``usage`` of its own reports cache hits as a prefix cache
    would: the longest run of leading prompt parts (the model and tool list, then whole
    messages) some earlier chat request of this server began with. A client whose
    requests extend each other sees its hits grow; one that changes an early part (the
    system prompt, the tools) misses from there on."""
    after_last: Reply | None = None
    """The answer to every chat request once ``replies`` ran out (default: a 500
    saying the script is exhausted)."""

    @model_validator(mode="before")
    @classmethod
    def _a_list_is_the_replies(cls, value: Any) -> Any:
        return {"replies": value} if isinstance(value, list) else value


class ScriptError(ValueError):
    """A script file that cannot be read or does not have the script shape."""


def load_script(path: str | Path) -> Script:
    """Read a script file: JSON in the :class:`Script` shape, or a list of replies."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ScriptError(f"{path}: cannot read the script: {error}") from error
    except ValueError as error:
        raise ScriptError(f"{path}: not JSON: {error}") from error
    try:
        return Script.model_validate(value)
    except ValidationError as error:
        raise ScriptError(f"{path}: not a valid script: {error}") from error


def _check_header(name: str, value: str) -> None:
    if not name or any(c in name for c in ' \t\r\n:"(),/;<=>?@[\\]{}'):
        raise ValueError(f"header name {name!r} is not an HTTP token")
    if "\r" in value or "\n" in value:
        raise ValueError(f"header {name} has a line break in its value")
    try:
        (name + value).encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header {name} must be latin-1") from None
