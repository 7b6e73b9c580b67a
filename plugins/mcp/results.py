"""A ``tools/call`` result as the text the model reads.

Text blocks as they are; an embedded text resource under a line naming its URI; a
binary resource, an image or audio as a line saying what it was (images reach vision
models once dsh sends image parts); ``structuredContent`` as JSON when no text block
carries it already (the spec asks servers to send both, not all do). The tool pipeline
caps and spills the text as it does any tool's.
"""

from __future__ import annotations

import json

from mcp import types


def result_text(result: types.CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
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
