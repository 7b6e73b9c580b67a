"""A ``tools/call`` result as the text the model reads.

Text blocks as they are; an embedded text resource under a line naming its URI; a
binary resource or audio as a line saying what it was; an image as a line too, and
for a model with vision the image itself beside the text (:func:`images_of`, stored
with the session as any tool's image); ``structuredContent`` as JSON when no text block
carries it already (the spec asks servers to send both, not all do). The tool pipeline
caps and spills the text as it does any tool's.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Mapping

from mcp import types

from dsh.llm import Block
from dsh.tools import ToolContext
from dsh_plugins._shared.images import ImageError, prepare, registered, store_image, vision_of


def result_text(result: types.CallToolResult, attached: Mapping[int, str] | None = None) -> str:
    """The text of ``result``; ``attached``: what became of each image (by its number,
    from 1) that went, or could not go, to the model beside the text."""
    parts: list[str] = []
    number = 0
    for block in result.content:
        if isinstance(block, types.ImageContent):
            number += 1
            if attached and number in attached:
                parts.append(f"[image {number} ({block.mime_type}): {attached[number]}]")
                continue
        parts.append(_block(block))
    texts = [p for p in parts if p]
    if result.structured_content is not None and not any(
        isinstance(b, types.TextContent) for b in result.content
    ):
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    return "\n\n".join(texts) if texts else "(no output)"


def _block(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        kind = f" ({resource.mime_type})" if resource.mime_type else ""
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}{kind}]\n{resource.text}"
        return f"[resource {resource.uri}{kind}: {_size(resource.blob)} of binary data, not shown]"
    if isinstance(block, types.ImageContent):
        return f"[image ({block.mime_type}, {_size(block.data)}): not shown to the model]"
    if isinstance(block, types.AudioContent):
        return f"[audio ({block.mime_type}, {_size(block.data)}): not shown to the model]"
    if isinstance(block, types.ResourceLink):
        what = f" ({block.mime_type})" if block.mime_type else ""
        return f"[resource link {block.uri}{what}: {block.name}]"
    return f"[{getattr(block, 'type', 'unknown')} content, not shown]"


def _size(base64_data: str) -> str:
    size = len(base64_data) * 3 // 4
    return f"{size} bytes" if size < 10_000 else f"{size // 1024} KB"


async def images_of(
    result: types.CallToolResult, context: ToolContext, name: str
) -> tuple[list[Block], dict[int, str]]:
    """The images of ``result`` as image blocks stored with the session, when the
    calling agent's model takes images and the images plugin is loaded (else none), and
    what became of each, by number."""
    found = [b for b in result.content if isinstance(b, types.ImageContent)]
    agent = context.agent
    if not found or agent is None or not registered() or not vision_of(agent):
        return [], {}
    blocks: list[Block] = []
    fate: dict[int, str] = {}
    for number, image in enumerate(found, start=1):
        shown = f"{name}-{number}"
        try:
            data = base64.b64decode(image.data, validate=True)
            prepared = await asyncio.to_thread(prepare, data, shown)
            blocks.append(await store_image(agent, prepared, shown, "tool"))
            fate[number] = "attached"
        except (ImageError, binascii.Error, ValueError) as error:
            fate[number] = f"not attached, {error}"
    return blocks, fate
