"""An ACP prompt's images: which blocks go to ``prompt/attach``, what they are called,
and where their blocks land in the message (no process: the functions alone; without
the images plugin, tests/acp/test_images.py)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from acp.schema import (
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    TextContentBlock,
)

from dsh.llm import TextBlock
from dsh.ui.acp.prompt_blocks import media_of, prompt_message, prompt_text, takes_images
from dsh_plugins._shared.images import ImageBlock, register_block

DATA = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


@pytest.fixture
def images() -> Iterator[None]:
    release = register_block()
    try:
        yield
    finally:
        release()


def picture(uri: str | None = None, mime_type: str = "image/png") -> ImageContentBlock:
    return ImageContentBlock(type="image", data=DATA, mime_type=mime_type, uri=uri)


def test_images_are_found_named_and_put_in_their_place(images: None) -> None:
    assert takes_images()
    blocks = [
        TextContentBlock(type="text", text="compare"),
        picture("file:///home/me/a%20b.png"),
        TextContentBlock(type="text", text="with"),
        picture(mime_type="image/webp"),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///x/%0A%1B[31mred.gif", blob=DATA, mime_type="image/gif"
            ),
        ),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///x/doc.pdf", blob=DATA, mime_type="application/pdf"
            ),
        ),
    ]
    media = media_of(blocks)
    assert [(m.index, m.name) for m in media] == [
        (1, "a b.png"),
        (3, "image-2.webp"),
        (4, "[31mred.gif"),  # no line break, no escape character
    ]
    assert (
        prompt_text(blocks, media)
        == "compare with [binary resource file:///x/doc.pdf not included]"
    )
    made = [
        ImageBlock(digest=str(n), media_type="image/png", name=m.name, size=1)
        for n, m in enumerate(media)
    ]
    message = prompt_message(blocks, media, made)
    assert message.content == (
        TextBlock(text="compare"),
        made[0],
        TextBlock(text="with"),
        made[1],
        made[2],
        TextBlock(text="[binary resource file:///x/doc.pdf not included]"),
    )


def test_an_image_alone_is_introduced(images: None) -> None:
    blocks = [picture()]
    media = media_of(blocks)
    made = [ImageBlock(digest="d", media_type="image/png", name="image.png", size=1)]
    message = prompt_message(blocks, media, made)
    assert message.content == (TextBlock(text="(The user attached image.png.)"), made[0])
