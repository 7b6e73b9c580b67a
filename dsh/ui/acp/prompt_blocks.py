"""An ACP prompt (content blocks) as the message dsh sends the model.

Text is taken as it is. A resource link (a file the person dragged in) is named in
the text, so the model reads it with its tools, as a path typed in the prompt.
Embedded context (the editor sent a file's or a selection's text) goes in whole,
fenced and labelled with its URI. Images (an image block, or an embedded resource
whose bytes are declared an image) are :class:`Media`: when a plugin registered a block
that takes images (:func:`dsh.llm.attachable_media`), the session hands them to
``prompt/attach`` and the blocks it returns take their places in the message;
otherwise, like audio, they are named, not sent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from dsh.agent import Attached, Attachment
from dsh.llm import Block, TextBlock, UserMessage, attachable_media

if TYPE_CHECKING:
    from dsh.agent import AgentHandle
    from dsh.kernel import Context

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


@dataclass(frozen=True)
class Media:
    """Bytes of a prompt that go through ``prompt/attach``."""

    index: int
    """The block's place in the prompt."""
    data: str
    """Base64, as sent."""
    media_type: str | None
    """As the client declared it."""
    name: str


def takes_images() -> bool:
    """Whether a registered block takes images (``initialize``'s image capability)."""
    return any(kind.startswith("image/") for kind in attachable_media())


def media_of(blocks: Sequence[PromptBlock]) -> list[Media]:
    """The prompt's images, when a block takes them (else none: they are named)."""
    if not takes_images():
        return []
    found: list[Media] = []
    for index, block in enumerate(blocks):
        match block:
            case ImageContentBlock(data=data, mime_type=kind, uri=uri):
                found.append(Media(index, data, kind, _name(uri, kind, len(found))))
            case EmbeddedResourceContentBlock(
                resource=BlobResourceContents(blob=data, mime_type=kind, uri=uri)
            ) if kind is not None and kind.startswith("image/"):
                found.append(Media(index, data, kind, _name(uri, kind, len(found))))
    return found


async def attach(root: Context, agent: AgentHandle, media: Sequence[Media]) -> Attached:
    """The blocks ``prompt/attach`` makes of the prompt's media (checked, stored and
    noted in the log by the plugin that takes them), or why the prompt is refused."""
    from dsh.agent.hooks import PROMPT_ATTACH

    def decoded() -> list[Attachment] | str:
        out: list[Attachment] = []
        for item in media:
            try:
                data = base64.b64decode(item.data, validate=True)
            except (binascii.Error, ValueError):
                return f"{item.name}: its data is not base64, so nothing was sent"
            out.append(Attachment(data=data, media_type=item.media_type, name=item.name))
        return out

    attachments = await asyncio.to_thread(decoded)
    if isinstance(attachments, str):
        return Attached(refusal=attachments)
    attached = await root.serial(PROMPT_ATTACH, agent, attachments)
    if attached is None:
        return Attached(refusal="no plugin of this session takes images, so nothing was sent")
    if attached.refusal is None and len(attached.blocks) != len(media):
        return Attached(refusal="the images could not all be attached, so nothing was sent")
    return attached


def _name(uri: str | None, kind: str | None, number: int) -> str:
    """The file name a URI ends with, else ``image.png`` (``image-2.png``...)."""
    if uri:
        # Shown and told to the model: one line, nothing a terminal obeys.
        name = unquote(urlparse(uri).path).rsplit("/", 1)[-1]
        name = "".join(c for c in name if c.isprintable()).strip()[:200]
        if name:
            return name
    subtype = re.sub(r"[^a-z0-9]", "", (kind or "").partition("/")[2].lower())[:10]
    suffix = f".{subtype}" if subtype else ""
    return f"image{f'-{number + 1}' if number else ''}{suffix}"


def prompt_text(blocks: Sequence[PromptBlock], attached: Sequence[Media] = ()) -> str:
    """The prompt's text; the ``attached`` blocks left out (they go as themselves)."""
    skipped = {media.index for media in attached}
    parts: list[str] = []
    for index, block in enumerate(blocks):
        if index not in skipped:
            parts.append(_text(block))
    return " ".join(part for part in parts if part)


def _text(block: PromptBlock) -> str:
    match block:
        case TextContentBlock(text=text):
            return text
        case ResourceContentBlock(uri=uri, name=name):
            return _link(uri, name)
        case EmbeddedResourceContentBlock(resource=TextResourceContents() as resource):
            fence = "````" if "```" in resource.text else "```"
            return (
                f"\n<context uri={resource.uri!r}>\n{fence}\n{resource.text}\n{fence}\n</context>\n"
            )
        case EmbeddedResourceContentBlock(resource=resource):
            return f"[binary resource {resource.uri} not included]"
        case ImageContentBlock() | AudioContentBlock():
            return f"[{block.type} not included: dsh takes text and files here]"
    return ""


def prompt_message(
    blocks: Sequence[PromptBlock],
    attached: Sequence[Media] = (),
    made: Sequence[Block] = (),
) -> UserMessage:
    """The message: the prompt's text, with the blocks ``prompt/attach`` made of the
    ``attached`` media (``made``, in the same order) where those were in the prompt."""
    at = {media.index: block for media, block in zip(attached, made, strict=True)}
    content: list[Block] = []
    parts: list[str] = []

    def flush() -> None:
        text = " ".join(part for part in parts if part)
        if text:
            content.append(TextBlock(text=text))
        parts.clear()

    for index, block in enumerate(blocks):
        if index in at:
            flush()
            content.append(at[index])
        else:
            parts.append(_text(block))
    flush()
    if at and not any(isinstance(block, TextBlock) for block in content):
        names = ", ".join(media.name for media in attached)
        content.insert(0, TextBlock(text=f"(The user attached {names}.)"))
    return UserMessage(content=tuple(content))


def _link(uri: str, name: str) -> str:
    if not uri.startswith("file:"):
        return f"[{name}]({uri})"
    path = where(uri)
    # A path with no space is a mention, which attaches the file as one typed would.
    return f"`{path}`" if any(c.isspace() for c in path) else f"@{path}"


def where(uri: str) -> str:
    """A ``file:`` URI's path."""
    return unquote(urlparse(uri).path)
