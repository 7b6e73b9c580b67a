"""Fuzzing the SSE parser and the chat-completions adapter with what a server may send.

- A valid DeepSeek stream arrives the same however its bytes are split (mid-line,
  mid-UTF-8 character), with CRLF or LF line ends and keep-alive comments anywhere:
  the adapter yields the same chunks, and they assemble into the reply that was sent.
- Any sequence of JSON events, however far from a chat-completion chunk, and any
  bytes at all: the adapter never raises anything but ``LlmError``, ends with exactly
  one ``finish`` (an error finish when the shape was wrong), and every chunk it yields
  keeps the stream protocol (``BlockAssembler`` accepts them all).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from dsh.llm import (
    BlockAssembler,
    Finish,
    GenerateOptions,
    LlmError,
    StreamChunk,
    ToolCallBlock,
    user_text,
)
from dsh.llm.sse import SseParser
from dsh.testing import Reply, ToolCallSpec, Usage
from dsh.testing.rendering import Rendering
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter, ChatStreamTranslator
from tests.reliability.profiles import fuzz

OPTIONS = GenerateOptions(
    provider="deepseek", model="deepseek-v4-flash", messages=(user_text("hi"),)
)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


async def _stream(pieces: Sequence[bytes]) -> tuple[list[StreamChunk], BaseException | None]:
    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    adapter = ChatCompletionsAdapter(
        base_url="http://model.test", models={}, api_key=lambda: "sk-test", client=client
    )
    chunks: list[StreamChunk] = []
    raised: BaseException | None = None
    try:
        async for chunk in adapter.stream(OPTIONS):
            chunks.append(chunk)
    except LlmError as error:
        raised = error
    finally:
        await client.aclose()
    return chunks, raised


def stream(pieces: Sequence[bytes]) -> tuple[list[StreamChunk], BaseException | None]:
    return asyncio.run(_stream(pieces))


def protocol_kept(chunks: list[StreamChunk]) -> BlockAssembler:
    """Every chunk is accepted by the strict assembler, and exactly one finish ends them."""
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)  # raises StreamProtocolError on any violation
    finishes = [c for c in chunks if isinstance(c, Finish)]
    assert len(finishes) == 1, chunks[-3:]
    assert chunks[-1] is finishes[0], chunks[-3:]
    return assembler


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    calls = [
        ToolCallSpec(
            name=draw(st.sampled_from(["read", "bash", "echo"])), arguments={"x": draw(TEXT)}
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    return Reply(
        reasoning=draw(TEXT),
        text=draw(TEXT),
        tool_calls=calls,
        chunk_size=draw(st.integers(1, 12)),
        usage=Usage(prompt_tokens=10, completion_tokens=5),
    )


def wire(reply: Reply) -> bytes:
    rendering = Rendering(
        reply=reply,
        model="deepseek-v4-flash",
        usage=reply.usage or Usage(prompt_tokens=1, completion_tokens=1),
        call_ids=[f"call_{i}" for i in range(len(reply.tool_calls))],
        fingerprint="fp_test",
    )
    return b"".join(rendering.stream_events(include_usage=True))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@fuzz(150)
@given(replies(), st.lists(st.integers(0, 10_000), max_size=30), st.booleans(), st.data())
def test_a_valid_stream_reads_the_same_however_its_bytes_are_split(
    reply: Reply, cuts: list[int], crlf: bool, data: st.DataObject
) -> None:
    sent = wire(reply)
    if crlf:
        sent = sent.replace(b"\n", b"\r\n")
    events = sent.split(b"\r\n\r\n" if crlf else b"\n\n")
    comment = b": keep-alive\r\n\r\n" if crlf else b": keep-alive\n\n"
    with_comments = b""
    end = b"\r\n\r\n" if crlf else b"\n\n"
    for event in events[:-1]:
        if data.draw(st.booleans()):
            with_comments += comment
        with_comments += event + end
    expected, error = stream([wire(reply)])
    assert error is None
    chunks, error = stream(split(with_comments, cuts))
    assert error is None
    assert chunks == expected
    assembler = protocol_kept(chunks)
    content = assembler.content
    text = "".join(getattr(b, "text", "") for b in content if b.type == "text")
    reasoning = "".join(getattr(b, "text", "") for b in content if b.type == "reasoning")
    assert (reasoning, text) == (reply.reasoning, reply.text)
    calls = [b for b in content if isinstance(b, ToolCallBlock)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        (spec.name, spec.arguments) for spec in reply.tool_calls
    ]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**70) | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from(
    ["choices", "delta", "content", "reasoning_content", "tool_calls", "index", "id",
     "function", "name", "arguments", "finish_reason", "usage", "prompt_tokens",
     "completion_tokens", "prompt_tokens_details", "cached_tokens", "error", "message"]
)  # fmt: skip
# Chunk-like values: the keys a translator looks for, holding anything at all.
SHAPED = st.recursive(
    JSON,
    lambda inner: st.dictionaries(KEYS, inner, max_size=5) | st.lists(inner, max_size=3),
    max_leaves=20,
)


@fuzz(300)
@given(st.lists(SHAPED, max_size=6), st.booleans())
def test_any_events_give_protocol_chunks_ending_in_one_finish(
    events: list[Any], done: bool
) -> None:
    lines = b"".join(b"data: " + json.dumps(e, allow_nan=True).encode() + b"\n\n" for e in events)
    if done:
        lines += b"data: [DONE]\n\n"
    chunks, raised = stream([lines])
    assert raised is None or isinstance(raised, LlmError)
    if raised is None:
        assembler = protocol_kept(chunks)
        assert assembler.finish is not None


@fuzz(200)
@given(st.lists(SHAPED, max_size=6))
def test_the_translator_raises_only_llm_errors(events: list[Any]) -> None:
    translator = ChatStreamTranslator()
    for event in events:
        try:
            translator.event(event)
        except LlmError:
            return  # a malformed shape or the server's error event: what it may raise
    closing = translator.done()
    assert isinstance(closing[-1], Finish)
    assert not any(isinstance(chunk, Finish) for chunk in closing[:-1])


@fuzz(200)
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=10))
def test_any_bytes_end_in_one_finish(data: bytes, cuts: list[int]) -> None:
    chunks, raised = stream(split(data, cuts))
    assert raised is None or isinstance(raised, LlmError)
    if raised is None:
        protocol_kept(chunks)


@fuzz(200)
@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=20), max_size=12)
)
def test_the_sse_parser_takes_any_lines(lines: list[str]) -> None:
    parser = SseParser()
    out = [data for line in lines if (data := parser.feed(line)) is not None]
    tail = parser.end()
    # An event's data is only ever built from data: lines, joined by newlines.
    data_lines = [
        line.partition(":")[2].removeprefix(" ")
        for line in lines
        if line.partition(":")[0] == "data" and ":" in line
    ]
    joined = "\n".join([*out, *([tail] if tail is not None else [])])
    assert joined.split("\n") == "\n".join(data_lines).split("\n") or not data_lines
