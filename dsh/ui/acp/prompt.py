"""An ACP prompt (content blocks) as the message dsh sends the model.

Text is taken as it is. A resource link (a file the person dragged in) is named in
the text, so the model reads it with its tools, as a path typed in the prompt.
Embedded context (the editor sent a file's or a selection's text) goes in whole,
fenced and labelled with its URI. Images and audio are not offered in
``initialize`` (dsh's image block is a plugin's); one sent anyway is named, not sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote, urlparse

from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from dsh.llm import TextBlock, UserMessage

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def prompt_text(blocks: Sequence[PromptBlock]) -> str:
    parts: list[str] = []
    for block in blocks:
        match block:
            case TextContentBlock(text=text):
                parts.append(text)
            case ResourceContentBlock(uri=uri, name=name):
                parts.append(_link(uri, name))
            case EmbeddedResourceContentBlock(resource=TextResourceContents() as resource):
                fence = "````" if "```" in resource.text else "```"
                parts.append(
                    f"\n<context uri={resource.uri!r}>\n{fence}\n{resource.text}\n{fence}\n</context>\n"
                )
            case EmbeddedResourceContentBlock(resource=resource):
                parts.append(f"[binary resource {resource.uri} not included]")
            case ImageContentBlock() | AudioContentBlock():
                parts.append(f"[{block.type} not included: dsh takes text and files here]")
    return " ".join(part for part in parts if part)


def prompt_message(blocks: Sequence[PromptBlock]) -> UserMessage:
    return UserMessage(content=(TextBlock(text=prompt_text(blocks)),))


def _link(uri: str, name: str) -> str:
    if not uri.startswith("file:"):
        return f"[{name}]({uri})"
    path = where(uri)
    # A path with no space is a mention, which attaches the file as one typed would.
    return f"`{path}`" if any(c.isspace() for c in path) else f"@{path}"


def where(uri: str) -> str:
    """A ``file:`` URI's path."""
    return unquote(urlparse(uri).path)
