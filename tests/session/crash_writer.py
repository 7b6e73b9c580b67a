"""A session writer to be killed: ``python tests/session/crash_writer.py HOME BACKEND SEED``.

It creates a session under HOME, prints ``SESSION <id>``, then appends realistic
turns forever, now and then awaiting a flush and printing ``FLUSHED <seq>`` once every
event through ``seq`` is durable. The events come from :class:`Script`, which is
deterministic in its seed, so the test that kills this process can regenerate exactly
what was written and compare it with what storage kept.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pydantic import BaseModel

from dsh.llm import (
    AssistantMessage,
    BlockEnd,
    BlockStart,
    CallId,
    ContentBlock,
    Finish,
    FinishStop,
    FinishToolCalls,
    MessageId,
    ModelSource,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolResultMessage,
    ToolSource,
    UsageChunk,
    UserMessage,
)
from dsh.session.catalog import Catalog
from dsh.session.payloads import (
    AssistantChunk,
    AssistantMessageData,
    PromptTrigger,
    StepEnd,
    StepStart,
    ToolCall,
    ToolErrorIdentity,
    ToolResult,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
from dsh.session.store import Backend, SessionStore, make_persistence

MODEL = ModelSource(provider="fake", model="fake-1")
CWD = "/work/crash-project"
WINDOW = 0.02

# Multi-byte characters, quotes, backslashes and newlines make a torn write land
# inside an escape or a UTF-8 sequence as well as between plain ASCII bytes.
WORDS = (
    "the", "file", "reads", "config", "déjà", "vu", "naïve", "日本語", "テスト", "🙂",
    "say", '"quoted"', "back\\slash", "tab\there", "line\nbreak", "{brace}", "0.5", "∑",
)  # fmt: skip
TOOLS = ("read", "grep", "bash", "edit")


@dataclass(frozen=True)
class Planned:
    """One event to append: what ``Session.append`` is given, and the seq it gets."""

    seq: int
    type: str
    data: BaseModel
    sources: tuple[int, ...] | None = None


class Script:
    """Whole turns of a fake agent, the same for the same seed.

    ``next_seq`` and ``next_turn`` continue an existing log; ``id_prefix`` keeps the
    message ids of a continuation apart from those already in it.
    """

    def __init__(
        self, seed: int, *, next_seq: int = 0, next_turn: int = 1, id_prefix: str = "m"
    ) -> None:
        self._rng = random.Random(seed)
        self._seq = next_seq
        self._turn = next_turn
        self._prefix = id_prefix
        self._ids = 0

    def events(self) -> Iterator[Planned]:
        while True:
            yield from self.turn()

    def turn(self) -> list[Planned]:
        rng, turn = self._rng, self._turn
        self._turn += 1
        out = [
            self._plan("turn/start", TurnStart(turn=turn, trigger=PromptTrigger())),
            self._plan(
                "user/message",
                UserMessage(id=self._id(), content=(TextBlock(text=self._text(2, 30)),)),
            ),
        ]
        steps = rng.randint(1, 4)
        for step in range(1, steps + 1):
            out.extend(self._step(turn, step, calls=0 if step == steps else rng.randint(1, 3)))
        out.append(self._plan("turn/end", TurnEnd(turn=turn, reason=TurnCompleted())))
        return out

    def _step(self, turn: int, step: int, *, calls: int) -> list[Planned]:
        rng = self._rng
        out = [self._plan("step/start", StepStart(turn=turn, step=step))]
        chunk_seqs: list[int] = []
        blocks: list[ContentBlock] = []

        def chunk(value: StreamChunk) -> None:
            planned = self._plan(
                "assistant/chunk", AssistantChunk(turn=turn, step=step, chunk=value)
            )
            chunk_seqs.append(planned.seq)
            out.append(planned)

        def text_block(kind: str) -> None:
            index = len(blocks)
            pieces = [self._text(1, 3) + " " for _ in range(rng.randint(1, 12))]
            chunk(BlockStart(index=index, block_type="reasoning" if kind == "r" else "text"))
            for piece in pieces:
                chunk(
                    ReasoningDelta(index=index, text=piece)
                    if kind == "r"
                    else TextDelta(index=index, text=piece)
                )
            full = "".join(pieces)
            block = ReasoningBlock(text=full) if kind == "r" else TextBlock(text=full)
            chunk(BlockEnd(index=index, block=block))
            blocks.append(block)

        if rng.random() < 0.4:
            text_block("r")
        if calls == 0 or rng.random() < 0.7:
            text_block("t")
        tool_calls: list[ToolCallBlock] = []
        for k in range(calls):
            index = len(blocks)
            call = ToolCallBlock(
                id=CallId(f"call-{turn}-{step}-{k}"),
                name=rng.choice(TOOLS),
                arguments=json.dumps(
                    {"path": f"src/{self._text(1, 2)}.py", "pattern": self._text(1, 4)},
                    ensure_ascii=False,
                ),
            )
            chunk(BlockStart(index=index, block_type="tool-call"))
            for n, piece in enumerate(self._split(call.arguments)):
                chunk(
                    ToolCallDelta(
                        index=index,
                        id=call.id,
                        name=call.name if n == 0 else None,
                        arguments_delta=piece,
                    )
                )
            chunk(BlockEnd(index=index, block=call))
            blocks.append(call)
            tool_calls.append(call)
        usage = TokenUsage(
            input_tokens=rng.randint(0, 9000),
            output_tokens=rng.randint(1, 900),
            cache_read_tokens=rng.choice((None, rng.randint(0, 50000))),
        )
        chunk(UsageChunk(usage=usage))
        chunk(Finish(reason=FinishToolCalls() if calls else FinishStop()))
        message = AssistantMessage(id=self._id(), content=tuple(blocks), source=MODEL)
        out.append(
            self._plan(
                "assistant/message",
                AssistantMessageData(turn=turn, step=step, message=message, usage=usage),
                tuple(chunk_seqs),
            )
        )

        # Tools run one by one or side by side; results of a parallel batch come back
        # in any order.
        batches = [[c] for c in tool_calls] if rng.random() < 0.5 else [tool_calls]
        for batch in batches:
            started = {c.id: self._plan("tool/call", self._call(turn, step, c)) for c in batch}
            out.extend(started.values())
            for call in rng.sample(batch, len(batch)):
                out.append(
                    self._plan(
                        "tool/result",
                        self._result(turn, step, call),
                        (started[call.id].seq,),
                    )
                )
        out.append(self._plan("step/end", StepEnd(turn=turn, step=step)))
        return out

    def _call(self, turn: int, step: int, call: ToolCallBlock) -> ToolCall:
        return ToolCall(
            turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments
        )

    def _result(self, turn: int, step: int, call: ToolCallBlock) -> ToolResult:
        failed = self._rng.random() < 0.15
        # Now and then a large output (a whole file read): its write spans many pages,
        # the only kind a kill can cut short (rarely: the copy takes microseconds).
        words = (1500, 6000) if self._rng.random() < 0.1 else (1, 60)
        block = ToolResultBlock(
            tool_call_id=call.id,
            content=(TextBlock(text=self._text(*words)),),
            is_error=True if failed else None,
        )
        return ToolResult(
            turn=turn,
            step=step,
            message=ToolResultMessage(
                id=self._id(), content=(block,), source=ToolSource(call_id=call.id)
            ),
            error=ToolErrorIdentity(name=call.name, code="TOOL_FAILED") if failed else None,
        )

    def _plan(self, type_: str, data: BaseModel, sources: tuple[int, ...] | None = None) -> Planned:
        planned = Planned(self._seq, type_, data, sources)
        self._seq += 1
        return planned

    def _id(self) -> MessageId:
        self._ids += 1
        return MessageId(f"{self._prefix}{self._ids}")

    def _text(self, low: int, high: int) -> str:
        return " ".join(self._rng.choice(WORDS) for _ in range(self._rng.randint(low, high)))

    def _split(self, text: str) -> list[str]:
        """``text`` cut at random places, as a provider streams JSON arguments."""
        cuts = sorted(self._rng.sample(range(1, len(text)), min(len(text) - 1, 4)))
        return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


async def write_forever(home: Path, backend: Backend, seed: int) -> None:
    store = SessionStore(make_persistence(backend, home), Catalog(home), window=WINDOW)
    session = await store.create(CWD, model=MODEL.model)
    print(f"SESSION {session.id}", flush=True)
    # Pacing has its own generator so that the events depend on the seed alone.
    pace = random.Random(f"pace-{seed}")
    for planned in Script(seed).events():
        event = session.append(planned.type, planned.data, source_event_seqs=planned.sources)
        if event.seq != planned.seq:
            raise SystemExit(f"appended seq {event.seq}, planned {planned.seq}")
        roll = pace.random()
        if roll < 0.05:
            if not await store.flush(session):
                raise SystemExit(f"flush through seq {event.seq} failed")
            print(f"FLUSHED {event.seq}", flush=True)
        elif roll < 0.35:
            await asyncio.sleep(0)  # let the background writer's batches run
        elif roll < 0.40:
            await asyncio.sleep(pace.uniform(0, 0.004))  # a slow stretch of the stream


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[1] not in ("jsonl", "sqlite"):
        raise SystemExit("usage: crash_writer.py HOME jsonl|sqlite SEED")
    asyncio.run(write_forever(Path(argv[0]), cast(Backend, argv[1]), int(argv[2])))


if __name__ == "__main__":
    main(sys.argv[1:])
