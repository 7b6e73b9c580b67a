"""Token estimates without a tokenizer: about four characters a token, plus a few
tokens for each block and message.

Only a guess (code and non-Latin text run denser): what must be exact comes from the
provider's usage reports. Compaction calibrates these estimates by the latest report;
the prompt-cache notices use them as they are, and say "about".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from dsh.llm.blocks import Block, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from dsh.llm.messages import Message
from dsh.llm.request import ToolSchema

__all__ = [
    "CHARS_PER_TOKEN",
    "OVERHEAD",
    "block_tokens",
    "header_tokens",
    "message_tokens",
    "messages_tokens",
    "text_tokens",
]

CHARS_PER_TOKEN = 4
OVERHEAD = 4
"""Tokens a block or a message costs besides its text: roles, separators, ids."""


def text_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def block_tokens(block: Block) -> int:
    match block:
        case TextBlock(text=text) | ReasoningBlock(text=text):
            size = text_tokens(text)
        case ToolCallBlock(name=name, arguments=arguments):
            size = text_tokens(name) + text_tokens(arguments)
        case ToolResultBlock(content=content):
            size = sum(block_tokens(inner) for inner in content)
        case _:
            size = text_tokens(block.model_dump_json())
    return size + OVERHEAD


def message_tokens(message: Message) -> int:
    return OVERHEAD + sum(block_tokens(block) for block in message.content)


def messages_tokens(messages: Iterable[Message]) -> int:
    return sum(message_tokens(message) for message in messages)


def header_tokens(system: str | None, tools: Sequence[ToolSchema] | None) -> int:
    """The system prompt and the tool schemas, which every request carries."""
    size = text_tokens(system) + OVERHEAD if system else 0
    for tool in tools or ():
        size += text_tokens(json.dumps(tool.to_dict(), ensure_ascii=False)) + OVERHEAD
    return size
