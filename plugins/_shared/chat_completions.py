"""The OpenAI-style chat-completions protocol, as DeepSeek and compatible servers speak it.

Three pieces, each usable alone: :func:`request_body` turns a :class:`GenerateOptions`
into the JSON body; :class:`ChatStreamTranslator` turns the streamed JSON events into
:data:`StreamChunk` values; :func:`http_failure` turns an HTTP error into an
:class:`LlmFailure`. :class:`ChatCompletionsAdapter` joins them over one shared
``httpx.AsyncClient``; the DeepSeek and OpenAI-compatible plugins configure it, and
:func:`connection_test` makes one for their setup forms' connection test.

A library those plugins share (see :mod:`dsh_plugins._shared`), built on dsh's public API.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

if "httpx" not in sys.modules:
    # httpx imports its command-line client (rich, click and pygments: ~80 ms, a sixth
    # of a headless start) whenever they are installed, and dsh's UIs install rich. A
    # module marked absent is skipped, as httpx does when they are missing.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx
from pydantic import PositiveInt

from dsh import __version__
from dsh.control_chars import visible
from dsh.credentials import CredentialError, KeyDestination
from dsh.llm import (
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishError,
    FinishMaxTokens,
    FinishRefusal,
    FinishStop,
    FinishToolCalls,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    LlmFailure,
    Message,
    ModelInfo,
    ModelReasoning,
    Price,
    ProviderReply,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningEffortInfo,
    ResolvedModel,
    RetryPolicy,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    UsageChunk,
    api_path,
)
from dsh.llm.sse import SseLines, SseParser
from dsh.llm.tls import TlsContext
from dsh.setup import ConnectionTest, ProviderSetup, SetupChoice
from dsh.wire import Frozen
from dsh_plugins._shared.dsml import DsmlSalvage, SalvagedCall, Visible
from dsh_plugins._shared.images import ImageBlock, data_url, placeholder

USER_AGENT = f"dsh/{__version__}"
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


# ---------------------------------------------------------------------- request


def _text(blocks: tuple[Any, ...]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def serialize_messages(
    options: GenerateOptions,
    *,
    replay_reasoning: bool,
    thinking: bool = False,
    vision: bool = False,
) -> list[dict[str, Any]]:
    """The ``messages`` array: the system prompt first, then the history.

    With ``replay_reasoning``, an assistant message whose answer carried reasoning sends
    it back as ``reasoning_content``; with ``thinking`` too (a request in thinking mode)
    every assistant message carries the field, empty when there was no reasoning. A
    tool result becomes a ``tool`` message; blocks of unknown types are skipped.

    Images go as ``image_url`` parts with a ``data:`` URL when ``vision`` says the model
    takes them, else as a placeholder text. A ``tool`` message can hold text alone, so
    an image a tool returned is sent as OpenAI-compatible agents send it: the tool
    message says it follows, and a user message holding the images comes right after
    the run of tool messages (tool messages must directly follow their call).
    """
    out: list[dict[str, Any]] = []
    if options.system:
        out.append({"role": "system", "content": options.system})
    deferred: list[dict[str, Any]] = []
    for message in options.messages:
        entries = _serialize(message, replay_reasoning, thinking, vision, deferred)
        if deferred and any(entry["role"] != "tool" for entry in entries):
            out.extend(deferred)
            deferred.clear()
        out.extend(entries)
    out.extend(deferred)
    return out


def _reasoning(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, ReasoningBlock))


def _image_part(block: ImageBlock, vision: bool) -> dict[str, Any]:
    url = data_url(block) if vision else None
    if url is None:
        return {"type": "text", "text": placeholder(block, vision=vision)}
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(blocks: tuple[Any, ...], vision: bool) -> str | list[dict[str, Any]]:
    """A plain string, or the parts of a message that holds images."""
    if not any(isinstance(b, ImageBlock) for b in blocks):
        return _text(blocks)
    parts: list[dict[str, Any]] = []
    for item in blocks:
        if isinstance(item, TextBlock) and item.text:
            parts.append({"type": "text", "text": item.text})
        elif isinstance(item, ImageBlock):
            parts.append(_image_part(item, vision))
    return parts


def _serialize(
    message: Message,
    replay_reasoning: bool,
    thinking: bool,
    vision: bool,
    deferred: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    if message.role == "assistant":
        calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
        reasoning = _reasoning(message)
        entry: dict[str, Any] = {"role": "assistant", "content": _text(message.content)}
        # DeepSeek's thinking mode answers 400 unless reasoning comes back, and some
        # deployments reject an assistant message without the field at all.
        if replay_reasoning and (reasoning or thinking):
            entry["reasoning_content"] = reasoning
        if calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ]
        return [entry]
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    out: list[dict[str, Any]] = []
    for result in results:
        text = _text(result.content)
        images = [b for b in result.content if isinstance(b, ImageBlock)]
        if images and vision:
            names = ", ".join(image.name for image in images)
            note = f"(The image {names} follows in the next message.)"
            text = f"{text}\n{note}" if text else note
            deferred.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": f"The image from tool call {result.tool_call_id}:",
                        },
                        *(_image_part(image, vision) for image in images),
                    ],
                }
            )
        elif images:
            shown = "\n".join(placeholder(image, vision=False) for image in images)
            text = f"{text}\n{shown}" if text else shown
        out.append(
            {"role": "tool", "tool_call_id": result.tool_call_id, "content": text or "(no output)"}
        )
    content = _user_content(message.content, vision)
    # Tool messages must follow the assistant message that called them, so any text
    # sent with results goes after them.
    if content or not results:
        out.append({"role": message.role, "content": content})
    return out


def thinking_mode(options: GenerateOptions, effort: str | None) -> bool:
    """Whether a request is in thinking mode: the request turns thinking on (an effort
    other than ``off``), or it leaves thinking to the server and the conversation shows
    the model thinks (an earlier answer carried reasoning). Decided by the request and
    the conversation, never by a list of model ids."""
    if effort == "off":
        return False
    if effort is not None:
        return True
    return any(message.role == "assistant" and _reasoning(message) for message in options.messages)


def request_body(
    options: GenerateOptions, model: ChatModel, *, replay_reasoning: bool = True
) -> dict[str, Any]:
    """The JSON body for ``options``. Absent fields are left out, never sent as null.

    ``replay_reasoning`` is the provider's setting; the model's own can turn it off too.
    """
    effort = options.reasoning_effort
    if options.purpose == "session-title":
        effort = "off" if model.thinking else None  # titles never need thinking
    thinking = thinking_mode(options, effort)
    body: dict[str, Any] = {
        "model": model.sent_as or options.model,
        "messages": serialize_messages(
            options,
            replay_reasoning=replay_reasoning and model.replay_reasoning,
            thinking=thinking,
            vision=model.vision,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in options.tools
        ]
    if model.thinking:
        if effort == "off":
            body["thinking"] = {"type": "disabled"}
        elif effort is not None:
            body["thinking"] = {"type": "enabled"}
            body["reasoning_effort"] = effort
    elif effort is not None and effort != "off":
        body["reasoning_effort"] = effort
    # DeepSeek's docs: thinking mode ignores temperature, presence_penalty and
    # frequency_penalty (dsh sends only the first), so none is sent with it on.
    if options.temperature is not None and not thinking:
        body["temperature"] = options.temperature
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    if options.stop:
        body["stop"] = list(options.stop)
    return body


# ---------------------------------------------------------------------- stream


def map_usage(usage: Mapping[str, Any]) -> TokenUsage:
    """Provider usage to ours. ``prompt_tokens`` includes cache hits; ours does not."""
    prompt = int(usage.get("prompt_tokens") or 0)
    details = usage.get("prompt_tokens_details") or {}
    hit = details.get("cached_tokens") if isinstance(details, dict) else None
    if hit is None:
        hit = usage.get("prompt_cache_hit_tokens")
    completion_details = usage.get("completion_tokens_details") or {}
    reasoning = (
        completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    )
    return TokenUsage(
        input_tokens=max(0, prompt - int(hit or 0)),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=int(hit) if hit is not None else None,
        reasoning_tokens=int(reasoning) if reasoning is not None else None,
    )


class _Block:
    __slots__ = ("call_id", "index", "kind", "name", "parts")

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        self.kind = kind
        self.parts: list[str] = []
        self.call_id: CallId = CallId("")
        self.name = ""

    def block(self) -> Any:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text)
        if self.kind == "reasoning":
            return ReasoningBlock(text=text)
        return ToolCallBlock(id=self.call_id, name=self.name, arguments=text)


class ChatStreamTranslator:
    """Streamed chat-completion events to chunks.

    One reasoning block, one text block and one block per tool-call ``index``, each
    numbered in the order it opens. ``finish_reason`` and usage wait for ``[DONE]``,
    which closes every block, then reports usage and the finish.

    Tool calls the model wrote into its text as DSML markup become tool-call blocks
    (ids ``dsml-…``), the markup never shows, and the finish says tool calls so the
    loop runs them (see :mod:`dsh_plugins._shared.dsml`).
    """

    def __init__(self) -> None:
        self._blocks: list[_Block] = []
        self._reasoning: _Block | None = None
        self._text: _Block | None = None
        self._calls: dict[int, _Block] = {}
        self._finish_reason: str | None = None
        self._refused = False
        self._usage: TokenUsage | None = None
        self._dsml = DsmlSalvage()
        self._salvaged = 0
        self._salvage_id = uuid.uuid4().hex[:8]
        self.events = 0

    def _open(self, kind: str) -> tuple[_Block, BlockStart]:
        block = _Block(len(self._blocks), kind)
        self._blocks.append(block)
        return block, BlockStart(index=block.index, block_type=kind)

    def event(self, data: Any) -> list[StreamChunk]:
        """Chunks for one decoded event. Raises :class:`LlmError` for an error event or
        a shape that is not a chat-completion chunk."""
        self.events += 1
        try:
            return self._event(data)
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as error:
            # A field of the wrong type deep inside (usage counts that are lists, a
            # function that is a string...): malformed, like any other wrong shape.
            problem = f"an event of an unexpected shape ({type(error).__name__}: {error})"
            raise LlmError(_malformed(problem[:300])) from None

    def _event(self, data: Any) -> list[StreamChunk]:
        if not isinstance(data, dict):
            raise LlmError(_malformed(f"an event that is not a JSON object: {str(data)[:200]}"))
        if "error" in data:
            error = data["error"] if isinstance(data["error"], dict) else {"message": data["error"]}
            raise LlmError(
                LlmFailure(
                    message=str(error.get("message") or error)[:2000],
                    code=_provider_code(error) or "SERVER",
                )
            )
        out: list[StreamChunk] = []
        usage = data.get("usage")
        if isinstance(usage, dict):
            self._usage = map_usage(usage)
        choices = data.get("choices") or []
        if not isinstance(choices, list):
            raise LlmError(_malformed("'choices' is not a list"))
        for choice in choices:
            # A server asked for one answer may still stream others (``n`` > 1, or a
            # proxy fanning out): only the first is this answer, the rest would
            # interleave into it.
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise LlmError(_malformed("'delta' is not an object"))
            thought = delta.get("reasoning_content")
            if thought is None:
                thought = delta.get("reasoning")  # vLLM and others
            if isinstance(thought, str) and thought:
                if self._reasoning is None:
                    self._reasoning, start = self._open("reasoning")
                    out.append(start)
                self._reasoning.parts.append(thought)
                out.append(ReasoningDelta(index=self._reasoning.index, text=thought))
            content = delta.get("content")
            if isinstance(content, str) and content:
                out.extend(self._salvaging(self._dsml.feed(content)))
            refusal = delta.get("refusal")  # OpenAI-compatible servers declining
            if isinstance(refusal, str) and refusal:
                self._refused = True
                out.extend(self._answer(refusal))
            for call in delta.get("tool_calls") or ():
                out.extend(self._tool_call(call))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return out

    def _answer(self, content: Any) -> list[StreamChunk]:
        """Answer text (or a refusal, shown as the answer) into the one text block."""
        if not isinstance(content, str) or not content:
            return []
        out: list[StreamChunk] = []
        if self._text is None:
            self._text, start = self._open("text")
            out.append(start)
        self._text.parts.append(content)
        out.append(TextDelta(index=self._text.index, text=content))
        return out

    def _salvaging(self, pieces: list[Visible | SalvagedCall]) -> list[StreamChunk]:
        """Visible text into the text block; each salvaged call a tool-call block of
        its own, whole at once."""
        out: list[StreamChunk] = []
        for piece in pieces:
            if isinstance(piece, Visible):
                out.extend(self._answer(piece.text))
                continue
            self._salvaged += 1
            block, start = self._open("tool-call")
            block.call_id = CallId(f"dsml-{self._salvage_id}-{self._salvaged}")
            block.name = piece.name
            block.parts.append(piece.arguments)
            out.append(start)
            out.append(
                ToolCallDelta(
                    index=block.index,
                    id=block.call_id,
                    name=piece.name,
                    arguments_delta=piece.arguments,
                )
            )
        return out

    def _tool_call(self, call: Any) -> list[StreamChunk]:
        if not isinstance(call, dict) or not isinstance(call.get("index", 0), int):
            raise LlmError(_malformed("a tool call delta without an integer index"))
        function = call.get("function") or {}
        arguments = function.get("arguments") or ""
        out: list[StreamChunk] = []
        block = self._calls.get(call.get("index", 0))
        if block is None:
            block, start = self._open("tool-call")
            self._calls[call.get("index", 0)] = block
            block.call_id = CallId(str(call.get("id") or f"call_{block.index}"))
            out.append(start)
        # The name is the first one given: later deltas may repeat it or send it blank
        # ("" or null), and neither may change it; the id was fixed when the call opened.
        given = function.get("name")
        name = None
        if not block.name and isinstance(given, str) and given:
            block.name = name = given
        block.parts.append(arguments)
        out.append(
            ToolCallDelta(index=block.index, id=block.call_id, name=name, arguments_delta=arguments)
        )
        return out

    @property
    def finish_reason(self) -> str | None:
        """The ``finish_reason`` the stream has sent, if any: the answer is whole."""
        return self._finish_reason

    def done(self) -> list[StreamChunk]:
        """The closing chunks, at ``[DONE]`` (or once the stream has said how it
        finished and then ended or gone quiet)."""
        out = self._salvaging(self._dsml.end())
        out.extend(BlockEnd(index=b.index, block=b.block()) for b in self._blocks)
        if self._usage is not None:
            out.append(UsageChunk(usage=self._usage))
        match self._finish_reason:
            case _ if self._refused:
                reason: Any = FinishRefusal()
            case "stop" | None if not self._blocks:
                reason = FinishError(
                    failure=LlmFailure(message="the model returned nothing", code="EMPTY_RESPONSE")
                )
            case "stop" | None if self._salvaged:
                reason = FinishToolCalls()  # the calls were written as text
            case "stop" | None:
                reason = FinishStop()
            case "tool_calls" | "function_call":
                reason = FinishToolCalls()
            case "length":
                reason = FinishMaxTokens()
            case "content_filter":
                reason = FinishError(
                    failure=LlmFailure(
                        message=(
                            "the provider's content filter stopped the answer "
                            "(finish_reason content_filter); rephrase the request to go on"
                        ),
                        code="CONTENT_FILTER",
                    )
                )
            case "insufficient_system_resource":
                reason = FinishError(
                    failure=LlmFailure(
                        message=(
                            "the provider ran short of capacity and stopped the answer "
                            "(finish_reason insufficient_system_resource); try again shortly"
                        ),
                        code="OVERLOADED",
                    )
                )
            case other:
                reason = FinishError(
                    failure=LlmFailure(
                        message=f"the model stopped: {other}", code=str(other).upper()
                    )
                )
        out.append(Finish(reason=reason))
        return out

    def failed(self, failure: LlmFailure) -> list[StreamChunk]:
        """The usage seen so far and an error finish; open blocks stay open, so what
        was streamed is kept as an interrupted answer, with any text held back in
        case it was markup (shown as written; a cut answer's calls are never run)."""
        out = self._salvaging(self._dsml.end())
        if self._usage is not None:
            out.append(UsageChunk(usage=self._usage))
        out.append(Finish(reason=FinishError(failure=failure)))
        return out


def _json_body(body: dict[str, Any]) -> bytes:
    """The request body as httpx's ``json=`` would send it, except that a lone
    surrogate (a model's cut escape, echoed back in history) goes as its JSON escape
    rather than failing to encode, so the session can always be sent."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Only unpaired surrogates fail, and only inside JSON strings, where "\\udXXX"
        # is the escape that reads back as the same character.
        return text.encode("utf-8", "backslashreplace")


READ_PAUSE_S = 0.025
"""How long a stream that has caught up with the server waits before it reads again:
many tokens' time for a fast model, too short for anyone to notice."""
_WAITED_S = 0.0005
_BACKLOG = 16 * 1024
"""Bytes read without waiting that make a backlog rather than a trickle."""

HEADERS_TIMEOUT_S = 60.0
"""The default bound on the wait for the response headers (see docs/settings.md)."""
STREAM_IDLE_TIMEOUT_S = 120.0
"""The default bound on a silence once the headers came (see docs/settings.md)."""
END_GRACE_S = 2.0
"""How long a stream that has said how it finished (a ``finish_reason``, or
``[DONE]``) may take to send the rest (usage, ``[DONE]``, the end of the body): a
server sends them at once, so a stream still open after this has forgotten to end.
Keep-alive comments do not extend it."""
_DRAIN_LIMIT = 64 * 1024
"""Bytes read after ``[DONE]`` to reach the end of the body; a server sending more
has its connection closed instead."""
_SNIFF_LIMIT = 2048
"""Bytes of a body that is not an event stream read to say what it is."""
_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")


class _Silence(Exception):
    """A read of the body waited out its bound."""


class _Body:
    """A response body read piece by piece, no read waiting longer than ``idle_s``, nor
    past ``until`` once that is set (the grace of a stream that has finished)."""

    def __init__(self, response: Any, idle_s: float) -> None:
        self._pieces: AsyncIterator[bytes] = response.aiter_bytes()
        self.idle_s = idle_s
        self.until: float | None = None
        self._ahead: list[bytes] = []
        self.ended = False

    def push_back(self, piece: bytes) -> None:
        if piece:
            self._ahead.append(piece)

    async def read(self) -> bytes | None:
        """The next piece, or None at the end of the body. Raises :class:`_Silence`."""
        if self._ahead:
            return self._ahead.pop(0)
        if self.ended:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.idle_s
        if self.until is not None:
            deadline = min(deadline, self.until)
        try:
            async with asyncio.timeout_at(deadline):
                return await anext(self._pieces)
        except StopAsyncIteration:
            self.ended = True
            return None
        except TimeoutError:
            raise _Silence from None

    def grace(self, seconds: float = END_GRACE_S) -> None:
        """From now on, read for ``seconds`` more at most."""
        if self.until is None:
            self.until = asyncio.get_running_loop().time() + seconds

    async def drain(self) -> bool:
        """Read to the end of the body within the grace, so that its connection can
        carry the next request; False when it did not end in time."""
        self.grace()
        read = 0
        while read <= _DRAIN_LIMIT:
            try:
                piece = await self.read()
            except (_Silence, httpx.HTTPError):
                return False  # the connection is closed instead: the answer is whole
            if piece is None:
                return True
            read += len(piece)
        return False


async def _sse_lines(
    body: _Body,
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[str]:
    """The body's lines, cut as SSE cuts them (see :class:`SseLines`).

    A model streams hundreds of small events a second, and each read wakes the whole
    HTTP client and every consumer of the stream: read one event at a time, that was
    most of what a 500 tokens/s answer cost. So once a read has had to wait for the
    server after a trickle (less than :data:`_BACKLOG` since the last wait), the next
    one waits :data:`READ_PAUSE_S` first, and reads what came meanwhile at once. After
    a backlog it does not: the server is ahead, and pausing would only hold it up."""
    lines = SseLines()
    since_wait = 0
    while True:
        asked = clock()
        piece = await body.read()
        if piece is None:
            break
        trickle = False
        if clock() - asked > _WAITED_S:
            trickle, since_wait = since_wait < _BACKLOG, 0
        since_wait += len(piece)
        for line in lines.feed(piece):
            yield line
        if trickle:
            await pause(READ_PAUSE_S)
    for line in lines.end():
        yield line


async def _not_an_event_stream(body: _Body, content_type: str) -> str | None:
    """None when the body is an event stream (by its type, or by how it starts: some
    servers send one as another type); else what came instead, to show the person."""
    media = content_type.partition(";")[0].strip().lower()
    if media == "text/event-stream":
        return None
    head = b""
    while not head.strip() and len(head) < _SNIFF_LIMIT:
        piece = await body.read()
        if piece is None:
            break
        head += piece
    if head.lstrip().startswith(_SSE_STARTS):
        body.push_back(head)
        return None
    body.grace()  # enough of it to say what it is, not all of a slow page
    while len(head) < _SNIFF_LIMIT:
        try:
            piece = await body.read()
        except _Silence:
            break
        if piece is None:
            break
        head += piece
    text = " ".join(head[:_SNIFF_LIMIT].decode("utf-8", errors="replace").split())
    shown = visible(text[:300] + ("…" if len(text) > 300 else ""), one_line=True)
    kind = media or "no content type"
    return f"{kind}, not an event stream: {shown}" if shown else f"{kind}, an empty body"


def _malformed(what: str) -> LlmFailure:
    return LlmFailure(
        message=f"malformed response from the model server: {what}", code="MALFORMED_RESPONSE"
    )


def _provider_code(error: Mapping[str, Any]) -> str | None:
    code = error.get("code") or error.get("type")
    return str(code).upper() if code else None


# ---------------------------------------------------------------------- HTTP errors

_OVERFLOW = re.compile(r"context (length|window)|maximum context|too many tokens|too long", re.I)
_QUOTA = re.compile(r"insufficient (balance|quota)|quota|billing|credit", re.I)
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$"
)


def _seconds(value: str) -> float | None:
    """A header duration: ``12``, ``1.5``, ``6m0s``, ``250ms``; None if unreadable."""
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    match = _DURATION.match(value)
    if not match or not any(match.groups()):
        return None
    hours, minutes, secs, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + secs + millis / 1000


def retry_after_ms(headers: Mapping[str, str], now: float | None = None) -> int | None:
    """``Retry-After`` as milliseconds: seconds, or an HTTP date."""
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is None:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        seconds = moment.timestamp() - (now if now is not None else time.time())
    return max(0, round(seconds * 1000))


def reset_at_ms(headers: Mapping[str, str], now: float | None = None) -> int | None:
    """When the provider says its rate limit resets, from the usual headers."""
    for name in (
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
        "x-ratelimit-reset",
        "ratelimit-reset",
    ):
        value = headers.get(name)
        if not value:
            continue
        seconds = _seconds(value)
        if seconds is None:
            continue
        base = now if now is not None else time.time()
        # Some servers send an epoch second instead of a duration.
        return round(seconds * 1000) if seconds > 1_000_000_000 else round((base + seconds) * 1000)
    return None


def http_failure(
    status: int,
    headers: Mapping[str, str],
    body: str,
    *,
    provider: str,
    credential: str | None,
) -> LlmFailure:
    """What an HTTP error from a model server means, in the provider's own words."""
    detail = body.strip()
    try:
        parsed = json.loads(body)
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        if isinstance(error, dict) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
    except ValueError:
        pass
    detail = detail[:2000] or f"HTTP {status}"
    if status in (401, 403):
        fix = f"; check {credential}" if credential else ""
        message, code = f"{provider} rejected the credentials ({status}): {detail}{fix}", "AUTH"
    elif status == 402 or (status in (400, 403, 429) and _QUOTA.search(detail)):
        message, code = f"{provider} account: {detail}", "QUOTA"
    elif status == 429:
        message, code = f"{provider} is rate limiting requests: {detail}", "RATE_LIMIT"
    elif status == 400 and _OVERFLOW.search(detail):
        message, code = (
            f"the conversation is too long for the model: {detail}",
            "CONTEXT_WINDOW_EXCEEDED",
        )
    elif status in (400, 404, 413, 422):
        message, code = f"{provider} refused the request ({status}): {detail}", "INVALID_REQUEST"
    elif status >= 500:
        message, code = f"{provider} server error ({status}): {detail}", "SERVER"
    else:
        message, code = f"{provider} answered HTTP {status}: {detail}", f"HTTP_{status}"
    return LlmFailure(
        message=message,
        code=code,
        status=status,
        provider_retry_after_ms=retry_after_ms(headers),
        reset_at_ms=reset_at_ms(headers),
        request_id=headers.get("x-request-id") or headers.get("request-id"),
    )


# ---------------------------------------------------------------------- the adapter

ApiKey = Callable[[], str | None]


class ChatCompletionsAdapter(LlmAdapter):
    """An adapter for any server speaking chat completions over SSE.

    ``api_key`` is asked at every request (keys can change while dsh runs) and never
    stored; every message that leaves the adapter has it redacted.
    """

    def __init__(
        self,
        *,
        base_url: str,
        models: Mapping[str, ChatModel],
        fallback: ChatModel | None = None,
        api_key: ApiKey | None = None,
        credential: str | None = None,
        key_required: bool = True,
        headers: Mapping[str, str] | None = None,
        headers_timeout: float = HEADERS_TIMEOUT_S,
        stream_idle_timeout: float = STREAM_IDLE_TIMEOUT_S,
        connect_timeout: float = 30.0,
        retry_policy: RetryPolicy | None = None,
        list_models_path: str | None = "/models",
        client: httpx.AsyncClient | None = None,
        key_destination: KeyDestination | None = None,
        replay_reasoning: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key_destination = key_destination or KeyDestination(self.base_url)
        """Where the key may go; a request to any other origin carries none."""
        self._key_withheld = not self.key_destination.allows(self.base_url)
        self.models = dict(models)
        self.replay_reasoning = replay_reasoning
        """Send reasoning back as ``reasoning_content`` (see :func:`request_body`)."""
        self.fallback = fallback or ChatModel()
        self._api_key = api_key or (lambda: None)
        self.credential = credential
        self.key_required = key_required
        self._headers = dict(headers or {})
        self._list_models_path = list_models_path
        if retry_policy is not None:
            self.retry_policy = retry_policy
        self.headers_timeout = headers_timeout
        """From sending a request to its response headers, at most (seconds)."""
        self.stream_idle_timeout = stream_idle_timeout
        """A silence of the stream once the headers came, at most (seconds); any byte
        breaks it, keep-alive comments included."""
        self.connect_timeout = connect_timeout
        # The stream's own waits are bounded here (headers, silence, the end's grace),
        # so httpx's read timeout is left off for it; every other request has its own.
        self._timeout = httpx.Timeout(
            max(headers_timeout, stream_idle_timeout),
            connect=connect_timeout,
            pool=headers_timeout,
        )
        self._stream_timeout = httpx.Timeout(
            None, connect=connect_timeout, write=headers_timeout, pool=headers_timeout
        )
        self._client = client
        self._owns_client = client is None
        self._tls = TlsContext(self.base_url) if client is None else None

    async def _http(self) -> httpx.AsyncClient:
        """The client, made at the first request, once the TLS context has loaded."""
        if self._client is None:
            assert self._tls is not None
            try:
                context = await self._tls.get()
            except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
                raise LlmError(
                    LlmFailure(
                        message=f"cannot set up TLS to verify {self.base_url}: {error}",
                        code="TRANSPORT",
                    )
                ) from None
            if self._client is None:  # another request may have made it meanwhile
                self._client = httpx.AsyncClient(timeout=self._timeout, verify=context)
        return self._client

    def model(self, model: str) -> ChatModel:
        return self.models.get(model, self.fallback)

    def resolve_model(self, provider: str, model: str) -> ResolvedModel:
        return self.model(model).resolved(provider, model)

    def price(self, provider: str, model: str) -> Price | None:
        return self.model(model).price

    def _request_headers(self, provider: str) -> tuple[dict[str, str], str | None]:
        destination = self.key_destination
        if self._key_withheld and self.key_required:
            where = self.credential or "the API key"
            if destination.base_url is None:
                why = (
                    f"your own settings do not give {provider} the key {where} (a "
                    "project's settings chose it), so it is not sent"
                )
            else:
                why = (
                    f"{where} is sent only to {destination.base_url}, the address your own "
                    f"settings give {provider}, not to {self.base_url}, which a project's "
                    "settings chose"
                )
            fix = "configure it" if destination.base_url is None else "set its base_url"
            raise LlmError(
                LlmFailure(
                    message=f"{why}; {fix} in $DSH_HOME/settings.toml to use that server",
                    code="KEY_WITHHELD",
                )
            )
        try:
            key = None if self._key_withheld else self._api_key()
        except CredentialError as error:  # a key in a project .env not read, say
            raise LlmError(LlmFailure(message=str(error), code="MISSING_CREDENTIAL")) from None
        if not key and self.key_required:
            where = f"set {self.credential}" if self.credential else "configure an API key"
            raise LlmError(
                LlmFailure(
                    message=(
                        f"no API key for {provider}: {where} in the environment or in "
                        "$DSH_HOME/credentials.json, or run `dsh` once to set up a "
                        "provider interactively"
                    ),
                    code="MISSING_CREDENTIAL",
                )
            )
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "User-Agent": USER_AGENT,
            **self._headers,
        }
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers, key

    async def list_models(self, provider: str) -> list[ModelInfo]:
        listed: list[ModelInfo] = []
        read = False
        if self._list_models_path is not None:
            try:
                headers, _ = self._request_headers(provider)
                client = await self._http()
                response = await client.get(
                    self.base_url + self._list_models_path, headers=headers, timeout=10.0
                )
                if response.status_code == 200:
                    for entry in response.json().get("data", []):
                        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                            listed.append(
                                ModelInfo(
                                    provider=provider,
                                    id=entry["id"],
                                    name=entry["id"],
                                    offered=True,
                                )
                            )
                    read = True
            except (httpx.HTTPError, LlmError, ValueError, AttributeError):
                listed, read = [], False
        known = {info.id for info in listed}
        # What only dsh knows is listed too, and says whether the server offers it.
        listed.extend(
            ModelInfo(
                provider=provider,
                id=model,
                name=settings.name or model,
                offered=False if read else None,
            )
            for model, settings in self.models.items()
            if model not in known
        )
        return listed

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """One attempt. The response's connection is released (read to its end and
        back in the pool, or closed) before the finish is handed on: a consumer that
        stops reading at the finish, as every consumer does, leaves nothing open."""
        headers, key = self._request_headers(options.provider)
        body = request_body(
            options, self.model(options.model), replay_reasoning=self.replay_reasoning
        )
        provider = options.provider
        translator = ChatStreamTranslator()

        def hide(text: str) -> str:
            return text.replace(key, "***") if key and len(key) >= 4 else text

        def failure(message: str, code: str) -> LlmFailure:
            return LlmFailure(message=hide(message), code=code)

        client = await self._http()
        request = client.build_request(
            "POST",
            self.base_url + "/chat/completions",
            content=_json_body(body),
            headers=headers,
            timeout=self._stream_timeout,
        )
        response = await self._send(client, request, provider, failure)
        closing: list[StreamChunk] | None = None
        try:
            if response.status_code != 200:
                raise LlmError(await self._refusal(response, provider, hide))
            reader = _Body(response, self.stream_idle_timeout)
            try:
                instead = await _not_an_event_stream(
                    reader, response.headers.get("content-type", "")
                )
                if instead is not None:
                    raise LlmError(
                        failure(f"{provider} answered 200 with {instead}", "NOT_EVENT_STREAM")
                    )
                parser = SseParser()
                ended = False  # [DONE] came
                async for line in _sse_lines(reader):
                    data = parser.feed(line)
                    if data is None:
                        continue
                    if data == "[DONE]":
                        ended = True
                        break
                    try:
                        chunks = translator.event(json.loads(data))
                    except ValueError:
                        problem = _malformed(f"an event that is not JSON: {data[:200]!r}")
                        closing = translator.failed(problem)
                        break
                    except LlmError as error:
                        closing = translator.failed(error.failure)
                        break
                    for chunk in chunks:
                        yield chunk
                    if translator.finish_reason is not None:
                        reader.grace()  # what may follow a finish comes at once or never
                else:
                    ended = parser.end() == "[DONE]"
                if closing is None and ended:
                    closing = translator.done()
                    await reader.drain()
            except _Silence:
                if translator.finish_reason is None:
                    message = (
                        f"{provider} sent nothing for {self.stream_idle_timeout:g} s "
                        "(stream_idle_timeout)"
                    )
                    closing = translator.failed(failure(message, "TIMEOUT"))
            except httpx.TransportError as error:
                if translator.finish_reason is None:
                    detail = str(error) or type(error).__name__
                    if not translator.events:
                        message = f"the connection to {provider} broke before its answer: {detail}"
                        raise LlmError(failure(message, "TRANSPORT")) from None
                    message = f"the connection to {provider} broke: {detail}"
                    closing = translator.failed(failure(message, "STREAM_CLOSED"))
            if closing is None:
                if translator.finish_reason is not None:
                    # It said how it finished, then ended or went quiet without
                    # [DONE]: the answer is whole, and is not called interrupted.
                    closing = translator.done()
                else:
                    message = "the model server closed the stream before it finished"
                    closing = translator.failed(failure(message, "STREAM_CLOSED"))
        finally:
            await response.aclose()  # back to the pool when read to its end, else closed
        for chunk in closing:
            yield chunk

    async def _send(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        provider: str,
        failure: Callable[[str, str], LlmFailure],
    ) -> httpx.Response:
        """Send ``request``, waiting for the response headers at most
        ``headers_timeout``."""
        try:
            async with asyncio.timeout(self.headers_timeout):
                return await client.send(request, stream=True)
        except TimeoutError:
            message = (
                f"{provider} did not answer within {self.headers_timeout:g} s (headers_timeout)"
            )
            raise LlmError(failure(message, "TIMEOUT")) from None
        except httpx.PoolTimeout:
            message = (
                f"no free connection to {provider} within {self.headers_timeout:g} s: "
                "every one is in use"
            )
            raise LlmError(failure(message, "TIMEOUT")) from None
        except httpx.ConnectTimeout:
            message = (
                f"cannot reach {provider} at {self.base_url}: no connection within "
                f"{self.connect_timeout:g} s"
            )
            raise LlmError(failure(message, "TRANSPORT")) from None
        except httpx.TimeoutException as error:
            message = f"no answer from {provider} in time ({type(error).__name__})"
            raise LlmError(failure(message, "TIMEOUT")) from None
        except httpx.TransportError as error:
            message = f"cannot reach {provider} at {self.base_url}: {error}"
            raise LlmError(failure(message, "TRANSPORT")) from None

    async def _refusal(
        self, response: httpx.Response, provider: str, hide: Callable[[str], str]
    ) -> LlmFailure:
        """What an HTTP error status means; its body is read within the idle bound."""
        try:
            async with asyncio.timeout(self.stream_idle_timeout):
                raw = await response.aread()
        except (TimeoutError, httpx.HTTPError):
            raw = b""
        problem = http_failure(
            response.status_code,
            response.headers,
            hide(raw.decode("utf-8", errors="replace")),
            provider=provider,
            credential=self.credential,
        )
        if problem.request_id is not None:  # a proxy may echo the key anywhere
            problem = problem.model_copy(update={"request_id": hide(problem.request_id)})
        return problem

    def api_base_url(self, provider: str) -> str | None:
        return self.base_url

    async def post_json(
        self, provider: str, path: str, body: Mapping[str, Any], *, timeout_s: float
    ) -> ProviderReply:
        url = f"{self.base_url}/{api_path(path)}"
        # The same checks as a model call: the key goes only where the user's own
        # settings send it, and the path cannot leave the base URL.
        headers, key = self._request_headers(provider)
        headers["Accept"] = "application/json"

        def hide(text: str) -> str:
            return text.replace(key, "***") if key and len(key) >= 4 else text

        client = await self._http()
        try:
            response = await client.post(
                url, content=_json_body(dict(body)), headers=headers, timeout=timeout_s
            )
        except httpx.TimeoutException as error:
            message = f"no answer from {provider} in {timeout_s:g} s ({type(error).__name__})"
            raise LlmError(LlmFailure(message=message, code="TIMEOUT")) from None
        except httpx.TransportError as error:
            message = hide(f"cannot reach {provider} at {self.base_url}: {error}")
            raise LlmError(LlmFailure(message=message, code="TRANSPORT")) from None
        text = hide(response.text)
        try:
            parsed: Any = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = None
        return ProviderReply(status=response.status_code, body=parsed, text=text)

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()


def connection_test(
    form: ProviderSetup, choice: SetupChoice, key: str | None, timeout_s: float, *, base_url: str
) -> ConnectionTest:
    """What a provider's setup form asks for its connection test: an adapter for
    ``base_url`` with the key given, no model catalog, and timeouts within the test's."""
    adapter = ChatCompletionsAdapter(
        base_url=base_url,
        models={},
        api_key=lambda: key,
        credential=form.key_ref(choice),
        key_required=form.key_required,
        headers_timeout=timeout_s,
        stream_idle_timeout=timeout_s,
        connect_timeout=min(timeout_s, 10.0),
        list_models_path=None,
    )
    return ConnectionTest(adapter, base_url)
