"""The stream: chat-completion events decoded into dsh's stream chunks.

:class:`ChatStreamTranslator` turns each decoded SSE event into
:data:`~dsh.llm.StreamChunk` values (reasoning, text and tool-call blocks, DSML
markup salvaged into calls) and says how the answer finished.

Part of the chat-completions library (see :mod:`dsh_plugins._shared.chat_completions`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

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
    LlmError,
    LlmFailure,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)
from dsh_plugins._shared.chat_errors import malformed, provider_code
from dsh_plugins._shared.dsml import DsmlSalvage, SalvagedCall, Visible


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
            raise LlmError(malformed(problem[:300])) from None

    def _event(self, data: Any) -> list[StreamChunk]:
        if not isinstance(data, dict):
            raise LlmError(malformed(f"an event that is not a JSON object: {str(data)[:200]}"))
        if "error" in data:
            error = data["error"] if isinstance(data["error"], dict) else {"message": data["error"]}
            raise LlmError(
                LlmFailure(
                    message=str(error.get("message") or error)[:2000],
                    code=provider_code(error) or "SERVER",
                )
            )
        out: list[StreamChunk] = []
        usage = data.get("usage")
        if isinstance(usage, dict):
            self._usage = map_usage(usage)
        choices = data.get("choices") or []
        if not isinstance(choices, list):
            raise LlmError(malformed("'choices' is not a list"))
        for choice in choices:
            # A server asked for one answer may still stream others (``n`` > 1, or a
            # proxy fanning out): only the first is this answer, the rest would
            # interleave into it.
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise LlmError(malformed("'delta' is not an object"))
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
            raise LlmError(malformed("a tool call delta without an integer index"))
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
