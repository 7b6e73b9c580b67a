"""Wire streams in DeepSeek's (and an OpenAI-compatible server's) exact format, read by
the real adapter over httpx, and what the next request then sends back.

The fixtures under tests/fixtures/sse are raw ``text/event-stream`` bodies: thinking
mode with parallel tool calls and cache-hit usage, an answer cut at the output cap,
and a refusal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from dsh.llm import (
    AssistantMessage,
    BlockAssembler,
    FinishMaxTokens,
    FinishRefusal,
    FinishToolCalls,
    GenerateOptions,
    ModelSource,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    tool_result,
    user_text,
)
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter, ChatModel
from dsh_plugins.llm_deepseek import UNKNOWN_MODEL

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sse"


class Server:
    """Answers every request with the next raw stream, keeping each request's body."""

    def __init__(self, *streams: str) -> None:
        self.streams = [(FIXTURES / name).read_bytes() for name in streams]
        self.bodies: list[dict[str, Any]] = []

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        body = self.streams.pop(0) if self.streams else b"data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


async def ask(
    server: Server, options: GenerateOptions, fallback: ChatModel, **adapter: Any
) -> BlockAssembler:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server.answer))
    chat = ChatCompletionsAdapter(
        base_url="http://model.test",
        models={},
        fallback=fallback,
        api_key=lambda: "sk-test",
        client=client,
        **adapter,
    )
    assembler = BlockAssembler()
    try:
        async for chunk in chat.stream(options):
            assembler.push(chunk)
    finally:
        await client.aclose()
    return assembler


def assistant_fields(body: dict[str, Any]) -> list[Any]:
    return [m.get("reasoning_content") for m in body["messages"] if m["role"] == "assistant"]


async def test_a_v4_tool_call_stream_sends_its_reasoning_back_for_an_unknown_id() -> None:
    model = "deepseek-v4-flash-0731"
    server = Server("deepseek_v4_tool_calls.sse", "deepseek_v32_length.sse")
    first = GenerateOptions(
        provider="deepseek", model=model, messages=(user_text("Why does the build fail?"),)
    )
    answer = await ask(server, first, UNKNOWN_MODEL)
    assert isinstance(answer.finish, FinishToolCalls)
    assert answer.usage == TokenUsage(
        input_tokens=218, output_tokens=64, cache_read_tokens=4992, reasoning_tokens=12
    )
    message = answer.message(provider="deepseek", model=model)
    assert message.content == (
        ReasoningBlock(text="I need the Makefile and the CI log."),
        ToolCallBlock(id="call_00_Qm3xV8kTz1", name="read", arguments='{"path":"Makefile"}'),
        ToolCallBlock(id="call_01_Lp9wR2cYh4", name="bash", arguments='{"command":"cat ci.log"}'),
    )
    history = (
        *first.messages,
        message,
        tool_result(message.tool_calls[0].id, "all:\n\tcc -o app main.c"),
        tool_result(message.tool_calls[1].id, "main.c: No such file"),
    )
    second = GenerateOptions(provider="deepseek", model=model, messages=history, temperature=0.7)
    cut = await ask(server, second, UNKNOWN_MODEL)
    body = server.bodies[1]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "I need the Makefile and the CI log.",
        "tool_calls": [
            {
                "id": "call_00_Qm3xV8kTz1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path":"Makefile"}'},
            },
            {
                "id": "call_01_Lp9wR2cYh4",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command":"cat ci.log"}'},
            },
        ],
    }
    assert "temperature" not in body  # the conversation shows thinking mode
    # The V3.2 stream cut at the output cap keeps its reasoning and text.
    assert isinstance(cut.finish, FinishMaxTokens)
    assert cut.content == (
        ReasoningBlock(text="The user wants a long list."),
        TextBlock(text="1. alpha\n2. beta\n3. gam"),
    )
    assert cut.usage is not None
    assert cut.usage.cache_read_tokens == 768


async def test_thinking_mode_gives_every_assistant_message_the_field() -> None:
    server = Server("deepseek_v32_length.sse")
    source = ModelSource(provider="compat", model="qwen-thinking")
    history = (
        user_text("hi"),
        AssistantMessage(content=(TextBlock(text="hello"),), source=source),
        user_text("list things"),
    )
    options = GenerateOptions(
        provider="compat",
        model="qwen-thinking",
        messages=history,
        reasoning_effort="high",
        temperature=0.4,
    )
    await ask(server, options, ChatModel(efforts=("low", "high")))
    [body] = server.bodies
    assert assistant_fields(body) == [""]
    assert body["reasoning_effort"] == "high"
    assert "temperature" not in body
    assert "thinking" not in body


async def test_replay_off_for_a_server_that_rejects_the_field() -> None:
    server = Server("deepseek_v32_length.sse")
    source = ModelSource(provider="compat", model="qwen-thinking")
    history = (
        user_text("hi"),
        AssistantMessage(
            content=(ReasoningBlock(text="greet"), TextBlock(text="hello")), source=source
        ),
        user_text("list things"),
    )
    options = GenerateOptions(
        provider="compat", model="qwen-thinking", messages=history, temperature=0.4
    )
    await ask(server, options, ChatModel(), replay_reasoning=False)
    [body] = server.bodies
    assert assistant_fields(body) == [None]


async def test_a_refusal_stream_is_the_answer_with_finish_refusal() -> None:
    server = Server("openai_refusal.sse")
    options = GenerateOptions(
        provider="compat", model="gpt-compatible", messages=(user_text("do the bad thing"),)
    )
    answer = await ask(server, options, ChatModel())
    assert isinstance(answer.finish, FinishRefusal)
    assert answer.content == (TextBlock(text="I can't help with that."),)
    assert answer.usage is not None
    assert answer.usage.output_tokens == 6
