"""Images from the editor: an ACP image block (or an embedded resource holding an
image's bytes) becomes the same image block ``@shot.png`` makes, checked by its bytes,
stored in the session's blobs, sent to a vision model as an ``image_url``; refused,
with nothing sent, when it is not an image or the model has no vision."""

from __future__ import annotations

import asyncio
import base64
import io
import struct
import zlib
from pathlib import Path
from typing import Any

from acp.schema import (
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    TextContentBlock,
)
from PIL import Image

from dsh.session import check_log
from dsh.testing import FakeLLM, Reply
from tests.acp.client import Editor, editor_session
from tests.e2e.harness import SETTINGS, TIMEOUT, Dsh


def png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), "red").save(buffer, "PNG")
    return buffer.getvalue()


def huge_png_header() -> bytes:
    """A PNG's signature and header for a 20000x20000 image, and no pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def image(data: bytes, mime_type: str = "image/png", uri: str | None = None) -> ImageContentBlock:
    return ImageContentBlock(
        type="image", data=base64.b64encode(data).decode(), mime_type=mime_type, uri=uri
    )


def image_urls(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def stored_blobs(home: Path) -> list[Path]:
    return [path for path in home.rglob("blobs/*") if path.is_file()]


async def test_an_image_from_the_editor_reaches_the_model(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="A red rectangle."), Reply(text="Still red."))
    data = png_bytes()
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        assert editor.initialized is not None
        offered = editor.initialized.agent_capabilities
        assert offered is not None
        assert offered.prompt_capabilities is not None
        assert offered.prompt_capabilities.image is True
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = [
            TextContentBlock(type="text", text="what is in"),
            image(data, uri="file:///home/me/shot.png"),
            TextContentBlock(type="text", text="please?"),
        ]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert editor.text() == "A red rectangle."
    # Loaded in a new process, the session sends the image again, from its blobs.
    again = Editor()
    async with editor_session(dsh, again) as (conn, _):
        await asyncio.wait_for(conn.load_session(cwd=str(dsh.project), session_id=sid), TIMEOUT)
        assert "what is in" in again.said_by_user()
        reply = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text="sure?")]),
            TIMEOUT,
        )
        assert reply.stop_reason == "end_turn"
    [request, later] = fake_llm.chat_requests
    [url] = image_urls(request.body)
    assert url == "data:image/png;base64," + base64.b64encode(data).decode()
    assert image_urls(later.body) == [url]
    [user] = [m for m in request.body["messages"] if m["role"] == "user"][-1:]
    # In its place in the prompt, between the words.
    assert [part["type"] for part in user["content"]] == ["text", "image_url", "text"]
    # The request rebuilder of dsh.testing does not load images: the log is checked,
    # not rebuilt.
    events = await dsh.events(sid)
    assert check_log(events) == []
    [attached] = [e for e in events if e.type == "images/attached"]
    assert attached.data.origin == "client"
    assert attached.data.image.name == "shot.png"
    assert (attached.data.image.width, attached.data.image.height) == (64, 32)
    # The log holds the digest, the blobs the bytes.
    [blob] = stored_blobs(dsh.home)
    assert blob.read_bytes() == data
    assert base64.b64encode(data).decode() not in "".join(
        p.read_text(errors="replace") for p in dsh.home.rglob("*.jsonl")
    )


async def test_an_embedded_image_resource_is_attached(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Seen."))
    data = png_bytes()
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = [
            EmbeddedResourceContentBlock(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///home/me/diagram.png",
                    blob=base64.b64encode(data).decode(),
                    mime_type="image/png",
                ),
            )
        ]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "end_turn"
    [request] = fake_llm.chat_requests
    [url] = image_urls(request.body)
    assert url == "data:image/png;base64," + base64.b64encode(data).decode()
    sent = [m for m in request.body["messages"] if m["role"] == "user"][-1]
    assert sent["content"][0] == {"type": "text", "text": "(The user attached diagram.png.)"}
    events = await dsh.events(sid)
    assert check_log(events) == []
    assert [e.data.image.name for e in events if e.type == "images/attached"] == ["diagram.png"]


async def test_a_fake_png_is_refused_and_nothing_is_sent(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="never"))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = [
            TextContentBlock(type="text", text="look"),
            image(b"#!/bin/sh\nrm -rf ~\n", uri="file:///home/me/shot.png"),
        ]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "refusal"
        assert "shot.png is not a JPEG, PNG, GIF or WebP image" in editor.text()
        # Not base64 at all: refused the same way.
        broken = ImageContentBlock(type="image", data="%%%not base64", mime_type="image/png")
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[broken]), TIMEOUT)
        assert reply.stop_reason == "refusal"
        assert "not base64" in editor.text()
        # A few bytes that would decode to 400 million pixels: refused undecoded.
        reply = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[image(huge_png_header())]), TIMEOUT
        )
        assert reply.stop_reason == "refusal"
        assert "image.png is too large to decode (over 100,000,000 pixels)" in editor.text()
    assert fake_llm.chat_requests == []
    assert stored_blobs(dsh.home) == []
    # Nothing happened in the session: not even its log was written.
    assert sid not in await dsh.session_ids()


async def test_a_model_without_vision_gets_no_request(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="never"))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await conn.set_config_option(config_id="model", session_id=sid, value="deepseek-v4-pro")
        prompt = [TextContentBlock(type="text", text="what is it"), image(png_bytes())]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "refusal"
        said = editor.text()
        assert "deepseek-v4-pro does not take images, so nothing was sent (image.png)" in said
        assert "Up arrow" not in said  # the terminal's history is not the editor's
    assert fake_llm.chat_requests == []
    assert stored_blobs(dsh.home) == []
    assert sid not in await dsh.session_ids()


async def test_without_the_images_plugin_images_are_not_offered(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    (dsh.home / "settings.toml").write_text(SETTINGS + 'disabled = ["title", "images"]\n')
    fake_llm.add(Reply(text="Only words."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        assert editor.initialized is not None
        offered = editor.initialized.agent_capabilities
        assert offered is not None
        assert offered.prompt_capabilities is not None
        assert offered.prompt_capabilities.image is False
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = [TextContentBlock(type="text", text="look"), image(png_bytes())]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "end_turn"
    [request] = fake_llm.chat_requests
    assert image_urls(request.body) == []
    assert "[image not included" in str(request.body["messages"])
    assert stored_blobs(dsh.home) == []


async def test_a_large_image_is_scaled_before_it_is_stored(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Wide."))
    buffer = io.BytesIO()
    Image.new("RGB", (3000, 60), "green").save(buffer, "PNG")
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = [image(buffer.getvalue())]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "end_turn"
    [url] = image_urls(fake_llm.chat_requests[0].body)
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (2048, 41)
    events = await dsh.events(sid)
    [attached] = [e for e in events if e.type == "images/attached"]
    assert attached.data.scaled is True
