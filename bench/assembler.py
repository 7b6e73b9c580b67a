"""Stream assembly throughput: how many chunks per second BlockAssembler takes.

Target: >= 200,000 chunks/s, so that assembly is a small part of the >= 20,000
chunks/s end-to-end SSE budget (issue 4) even on a slow core.

Run: .venv/bin/python bench/assembler.py
"""

from __future__ import annotations

import json
import time

from report import Sample, figure, load_now, machine  # bench/report.py, beside this script

from dsh.llm import (
    BlockAssembler,
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishToolCalls,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)

TARGET = 200_000


def a_reply(tokens: int) -> list[object]:
    """A DeepSeek-shaped reply: reasoning, text, then two tool calls, one token a chunk."""
    chunks: list[object] = [BlockStart(index=0, block_type="reasoning")]
    chunks += [ReasoningDelta(index=0, text="think ") for _ in range(tokens // 2)]
    chunks.append(BlockEnd(index=0, block=ReasoningBlock(text="think " * (tokens // 2))))
    chunks.append(BlockStart(index=1, block_type="text"))
    chunks += [TextDelta(index=1, text="word ") for _ in range(tokens // 2)]
    chunks.append(BlockEnd(index=1, block=TextBlock(text="word " * (tokens // 2))))
    for n in (2, 3):
        arguments = json.dumps({"path": f"src/file_{n}.py", "limit": 200})
        pieces = [arguments[i : i + 4] for i in range(0, len(arguments), 4)]
        chunks.append(BlockStart(index=n, block_type="tool-call"))
        chunks += [
            ToolCallDelta(
                index=n, id=CallId(f"c{n}"), name="read" if i == 0 else None, arguments_delta=p
            )
            for i, p in enumerate(pieces)
        ]
        chunks.append(
            BlockEnd(
                index=n, block=ToolCallBlock(id=CallId(f"c{n}"), name="read", arguments=arguments)
            )
        )
    chunks.append(UsageChunk(usage=TokenUsage(input_tokens=1000, output_tokens=tokens)))
    chunks.append(Finish(reason=FinishToolCalls()))
    return chunks


def main() -> None:
    chunks = a_reply(2000)
    print(f"machine: {machine()}")
    load = load_now()
    rates = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20):
            assembler = BlockAssembler()
            for chunk in chunks:
                assembler.push(chunk)  # type: ignore[arg-type]
            assembler.message(provider="deepseek", model="deepseek-v4-flash")
        elapsed = time.perf_counter() - start
        rates.append(20 * len(chunks) / elapsed)
    taken = Sample(tuple(rates))
    print(
        figure(
            "assembler", taken, target=TARGET, unit="chunks/s", digits=0, at_least=True, load=load
        )
    )


if __name__ == "__main__":
    main()
