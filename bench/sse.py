"""SSE parsing and assembly throughput: streamed events to assembled blocks.

Target (the providers issue): >= 20,000 chunks/s on this machine.

Two figures: over real HTTP (the scripted server on 127.0.0.1 streams a 2,000-token
reply, one token an event, as fast as it can; the DeepSeek adapter parses it and a
BlockAssembler assembles it), and in-process (the same SSE lines through SseParser,
ChatStreamTranslator and BlockAssembler, no sockets), which isolates our own code.

Run: .venv/bin/python bench/sse.py
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from report import Sample, figure, load_now, machine  # bench/report.py, beside this script

from dsh.kernel import Candidate, Context, PluginHost
from dsh.llm import BlockAssembler, GenerateOptions, LlmService, user_text
from dsh.llm.sse import SseParser
from dsh.services import LLM
from dsh.testing import FakeLLM, Reply, Script
from dsh_plugins._shared.chat_completions import ChatStreamTranslator
from dsh_plugins.llm_deepseek import plugin as deepseek_plugin

TARGET = 20_000
TOKENS = 2_000


def reply() -> Reply:
    # 2,000 tokens: half reasoning, half text, one token (about 4 characters) an event.
    return Reply(reasoning="word " * (TOKENS // 2), text="text " * (TOKENS // 2), chunk_size=5)


async def over_http() -> tuple[Sample, int]:
    os.environ["DEEPSEEK_API_KEY"] = "sk-bench"
    rates: list[float] = []
    count = 0
    async with FakeLLM(Script(replies=[])) as server:
        root = Context()
        service = LlmService(root)
        root.provide(LLM, service)
        await PluginHost(root).load(
            [Candidate("llm-deepseek", "bench", plugin=deepseek_plugin)],
            configs={"llm-deepseek": {"base_url": server.base_url}},
        )
        options = GenerateOptions(
            provider="deepseek", model="deepseek-v4-flash", messages=(user_text("go"),)
        )
        for _ in range(5):
            server.add(reply())
            assembler = BlockAssembler()
            start = time.perf_counter()
            count = 0
            async for chunk in service.stream(options):
                assembler.push(chunk)
                count += 1
            elapsed = time.perf_counter() - start
            assert assembler.finished
            assert not assembler.failed
            rates.append(count / elapsed)
        await root.dispose()
    return Sample(tuple(rates)), count


def sse_lines() -> list[str]:
    events = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": None, "reasoning_content": ""},
                }
            ]
        }
    ]
    events += [
        {"choices": [{"index": 0, "delta": {"content": None, "reasoning_content": "word "}}]}
    ] * (TOKENS // 2)
    events += [
        {"choices": [{"index": 0, "delta": {"content": "text ", "reasoning_content": None}}]}
    ] * (TOKENS // 2)
    events.append(
        {
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": TOKENS},
        }
    )
    lines: list[str] = []
    for event in events:
        lines += [f"data: {json.dumps(event)}", ""]
    return [*lines, "data: [DONE]", ""]


def in_process() -> tuple[Sample, int]:
    lines = sse_lines()
    rates: list[float] = []
    count = 0
    for _ in range(7):
        start = time.perf_counter()
        parser, translator, assembler = SseParser(), ChatStreamTranslator(), BlockAssembler()
        count = 0
        for line in lines:
            data = parser.feed(line)
            if data is None:
                continue
            chunks = translator.done() if data == "[DONE]" else translator.event(json.loads(data))
            for chunk in chunks:
                assembler.push(chunk)
                count += 1
        rates.append(count / (time.perf_counter() - start))
        assert assembler.finished
    return Sample(tuple(rates)), count


def main() -> None:
    print(f"machine: {machine()}")
    load = load_now()
    http_rates, http_chunks = asyncio.run(over_http())
    label = f"SSE over HTTP to assembled blocks ({http_chunks} chunks a reply)"
    print(
        figure(
            label, http_rates, target=TARGET, unit="chunks/s", digits=0, at_least=True, load=load
        )
    )
    local_rates, local_chunks = in_process()
    print(
        f"SSE lines to assembled blocks, in process ({local_chunks} chunks; for information): "
        f"{local_rates.shown('chunks/s', 0)})"
    )


if __name__ == "__main__":
    main()
