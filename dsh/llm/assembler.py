"""Turning a chunk stream back into content blocks and one assistant message.

The assembler is strict: a chunk that breaks the protocol of :mod:`dsh.llm.stream`
raises :class:`StreamProtocolError` naming the :class:`Violation`, and leaves the
assembler exactly as it was before that chunk, so what was assembled so far can still
be kept as an interrupted answer.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from dsh.llm.blocks import Block, ReasoningBlock, TextBlock, ToolCallBlock
from dsh.llm.ids import CallId, MessageId, new_message_id
from dsh.llm.messages import AssistantMessage, ModelSource
from dsh.llm.stream import (
    BlockEnd,
    BlockStart,
    BlockType,
    Finish,
    FinishAborted,
    Finished,
    FinishError,
    FinishMaxTokens,
    FinishRefusal,
    FinishStop,
    FinishToolCalls,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    UnknownFinish,
    UsageChunk,
)


class Violation(enum.StrEnum):
    CHUNK_AFTER_FINISH = "chunk-after-finish"
    UNOPENED_BLOCK = "unopened-block"
    """A delta or block-end for an index no block-start opened."""
    BLOCK_ALREADY_OPENED = "block-already-opened"
    """A block-start for an index already used."""
    BLOCK_ALREADY_ENDED = "block-already-ended"
    """A delta or a second block-end after the block ended."""
    DELTA_TYPE_MISMATCH = "delta-type-mismatch"
    """A delta of another kind than its block (text into a reasoning block...)."""
    TOOL_CALL_ID_MISMATCH = "tool-call-id-mismatch"
    TOOL_CALL_NAME_MISMATCH = "tool-call-name-mismatch"
    BLOCK_END_MISMATCH = "block-end-mismatch"
    """A block-end whose block differs from what its deltas built."""
    DUPLICATE_USAGE = "duplicate-usage"
    UNCLOSED_BLOCK = "unclosed-block"
    """A normal finish while a block is still open."""
    MISSING_FINISH = "missing-finish"
    """The message was asked for before the stream finished."""


class StreamProtocolError(Exception):
    """A chunk stream broke the protocol."""

    def __init__(
        self, violation: Violation, detail: str, *, position: int, chunk: StreamChunk | None
    ) -> None:
        super().__init__(f"{violation}: {detail} (chunk {position})")
        self.violation = violation
        self.detail = detail
        self.position = position
        self.chunk = chunk


@dataclass(eq=False)
class _Building:
    block_type: BlockType
    parts: list[str] = field(default_factory=list)
    call_id: CallId | None = None
    name: str | None = None
    done: Block | None = None

    def text(self) -> str:
        return "".join(self.parts)

    def as_block(self) -> Block:
        """The block its deltas have built so far."""
        if self.done is not None:
            return self.done
        match self.block_type:
            case "text":
                return TextBlock(text=self.text())
            case "reasoning":
                return ReasoningBlock(text=self.text())
            case "tool-call":
                return ToolCallBlock(
                    id=self.call_id or CallId(""), name=self.name or "", arguments=self.text()
                )


_DELTA_TYPE: dict[type[Any], BlockType] = {
    TextDelta: "text",
    ReasoningDelta: "reasoning",
    ToolCallDelta: "tool-call",
}
_BLOCK_CLASS: dict[BlockType, type[Block]] = {
    "text": TextBlock,
    "reasoning": ReasoningBlock,
    "tool-call": ToolCallBlock,
}


class BlockAssembler:
    """Feed chunks with :meth:`push`; read :attr:`content`, :attr:`usage`, :attr:`finish`."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Building] = {}  # insertion order = opening order
        self._position = 0
        self.usage: TokenUsage | None = None
        self.finish: Finished | None = None
        self.replay_state: Any = None

    @property
    def finished(self) -> bool:
        return self.finish is not None

    def feed(self, chunks: Iterable[StreamChunk]) -> BlockAssembler:
        for chunk in chunks:
            self.push(chunk)
        return self

    def push(self, chunk: StreamChunk) -> None:
        if self.finish is not None:
            self._fail(Violation.CHUNK_AFTER_FINISH, "the stream already finished", chunk)
        match chunk:
            case TextDelta(index=index, text=text) | ReasoningDelta(index=index, text=text):
                self._open_for_delta(chunk, index).parts.append(text)
            case ToolCallDelta(index=index, id=call_id, name=name, arguments_delta=arguments):
                building = self._open_for_delta(chunk, index)
                if building.call_id is not None and building.call_id != call_id:
                    self._fail(
                        Violation.TOOL_CALL_ID_MISMATCH,
                        f"block {index} is call {building.call_id!r}, not {call_id!r}",
                        chunk,
                    )
                if name is not None and building.name is not None and building.name != name:
                    self._fail(
                        Violation.TOOL_CALL_NAME_MISMATCH,
                        f"block {index} calls {building.name!r}, not {name!r}",
                        chunk,
                    )
                building.call_id = call_id
                if name is not None:
                    building.name = name
                building.parts.append(arguments)
            case BlockStart(index=index, block_type=block_type):
                if index in self._blocks:
                    self._fail(
                        Violation.BLOCK_ALREADY_OPENED, f"block {index} was already opened", chunk
                    )
                self._blocks[index] = _Building(block_type)
            case BlockEnd(index=index, block=block):
                ending = self._blocks.get(index)
                if ending is None:
                    self._fail(Violation.UNOPENED_BLOCK, f"block {index} was never opened", chunk)
                if ending.done is not None:
                    self._fail(Violation.BLOCK_ALREADY_ENDED, f"block {index} already ended", chunk)
                self._check_end(index, ending, block, chunk)
                ending.done = block
            case UsageChunk(usage=usage):
                if self.usage is not None:
                    self._fail(Violation.DUPLICATE_USAGE, "usage was already reported", chunk)
                self.usage = usage
            case Finish(reason=reason, replay_state=replay_state):
                if isinstance(
                    reason, FinishStop | FinishToolCalls | FinishMaxTokens | FinishRefusal
                ):
                    still_open = [i for i, b in self._blocks.items() if b.done is None]
                    if still_open:
                        self._fail(
                            Violation.UNCLOSED_BLOCK,
                            f"finish {reason.kind!r} with block(s) {still_open} still open",
                            chunk,
                        )
                self.finish = reason
                self.replay_state = replay_state
        self._position += 1

    # ------------------------------------------------------------------ results

    @property
    def content(self) -> tuple[Block, ...]:
        """The ended blocks in the order they were opened. A ``max-tokens`` finish drops
        tool calls, whose arguments may be cut short."""
        drop_calls = isinstance(self.finish, FinishMaxTokens)
        return tuple(
            b.done
            for b in self._blocks.values()
            if b.done is not None and not (drop_calls and isinstance(b.done, ToolCallBlock))
        )

    def interrupted_blocks(self) -> tuple[Block, ...]:
        """What the user already saw of a stream cut short: the non-blank text and
        reasoning blocks, ended or not, in opening order."""
        kept: list[Block] = []
        for building in self._blocks.values():
            if building.block_type == "tool-call":
                continue
            block = building.as_block()
            if isinstance(block, TextBlock | ReasoningBlock) and block.text.strip():
                kept.append(block)
        return tuple(kept)

    @property
    def failed(self) -> bool:
        return isinstance(self.finish, FinishAborted | FinishError | UnknownFinish)

    def message(
        self, *, provider: str, model: str, id: MessageId | None = None
    ) -> AssistantMessage:
        """The assistant message of a finished stream."""
        if self.finish is None:
            raise StreamProtocolError(
                Violation.MISSING_FINISH,
                "the stream has not finished",
                position=self._position,
                chunk=None,
            )
        return AssistantMessage(
            id=id or new_message_id(),
            content=self.content,
            source=ModelSource(provider=provider, model=model, replay_state=self.replay_state),
        )

    # ------------------------------------------------------------------ checks

    def _open_for_delta(self, chunk: StreamChunk, index: int) -> _Building:
        building = self._blocks.get(index)
        if building is None:
            self._fail(Violation.UNOPENED_BLOCK, f"block {index} was never opened", chunk)
        if building.done is not None:
            self._fail(Violation.BLOCK_ALREADY_ENDED, f"block {index} already ended", chunk)
        expected = _DELTA_TYPE[type(chunk)]
        if building.block_type != expected:
            self._fail(
                Violation.DELTA_TYPE_MISMATCH,
                f"a {chunk.type} for {building.block_type} block {index}",
                chunk,
            )
        return building

    def _check_end(self, index: int, building: _Building, block: Block, chunk: StreamChunk) -> None:
        wanted = _BLOCK_CLASS[building.block_type]
        if type(block) is not wanted:
            self._fail(
                Violation.BLOCK_END_MISMATCH,
                f"block {index} is {building.block_type}, ended as {block.type}",
                chunk,
            )
        mismatch: str | None = None
        match block:
            case TextBlock(text=text) | ReasoningBlock(text=text):
                if text != building.text():
                    mismatch = "its text differs from the deltas"
            case ToolCallBlock(id=call_id, name=name, arguments=arguments):
                if building.call_id is not None and call_id != building.call_id:
                    mismatch = f"its call id {call_id!r} differs from {building.call_id!r}"
                elif building.name is not None and name != building.name:
                    mismatch = f"its name {name!r} differs from {building.name!r}"
                elif arguments != building.text():
                    mismatch = "its arguments differ from the deltas"
        if mismatch is not None:
            self._fail(Violation.BLOCK_END_MISMATCH, mismatch, chunk)

    def _fail(self, violation: Violation, detail: str, chunk: StreamChunk) -> NoReturn:
        raise StreamProtocolError(violation, detail, position=self._position, chunk=chunk)


def assemble(chunks: Iterable[StreamChunk]) -> BlockAssembler:
    """Push every chunk into a new assembler and return it."""
    return BlockAssembler().feed(chunks)
