"""Content blocks: the typed pieces a message is made of.

The four built-in blocks are text, reasoning (the model's thinking, kept apart from
its visible text), tool-call and tool-result. A plugin adds a block type with
``content_blocks.register(Model)``; a block whose type nobody registered loads as an
:class:`UnknownBlock`, keeps its fields, and is skipped by adapters.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from dsh.llm.ids import CallId
from dsh.wire import Frozen, Opaque, TaggedUnion


class Block(Frozen):
    """Base of every content block."""

    type: str
    media_types: ClassVar[tuple[str, ...]] = ()
    """The media types of bytes a person may attach to a prompt as a block of this
    type (an image block's formats). A front end whose client sends bytes (an editor's
    image) offers to take these, and hands them to ``prompt/attach``, which the plugin
    that registered the block answers."""


class UnknownBlock(Block, Opaque):
    """A block of a type this process does not know."""


content_blocks: TaggedUnion[Block] = TaggedUnion("content block", Block, "type", UnknownBlock)
ContentBlock: TypeAlias = Annotated[Block, content_blocks.validator, content_blocks.serializer]


@content_blocks.member
class TextBlock(Block):
    type: Literal["text"] = "text"
    text: str


@content_blocks.member
class ReasoningBlock(Block):
    type: Literal["reasoning"] = "reasoning"
    text: str


@content_blocks.member
class ToolCallBlock(Block):
    type: Literal["tool-call"] = "tool-call"
    id: CallId
    name: str
    arguments: str
    """The model's exact JSON text; parsed only at dispatch."""


@content_blocks.member
class ToolResultBlock(Block):
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: CallId
    content: tuple[ContentBlock, ...]
    is_error: bool | None = None


def attachable_media() -> frozenset[str]:
    """The media types the registered blocks take as attachments (:attr:`Block.media_types`)."""
    found: set[str] = set()
    for tag in content_blocks.tags:
        model = content_blocks.lookup(tag)
        if model is not None:
            found.update(model.media_types)
    return frozenset(found)


def joined_text(blocks: tuple[Block, ...] | list[Block]) -> str:
    """The text of every text block, concatenated."""
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))
