"""Images in plain mode: ``@shot.png`` and ``/image PATH`` typed at the prompt, the
image line printed, the image at the scripted server; with a model without vision
the refusal printed and no request made."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image
from prompt_toolkit.input import PipeInput

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from tests.ui.plain_support import Plain


def png(path: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), "blue").save(buffer, "PNG")
    path.write_bytes(buffer.getvalue())


def image_parts(server: FakeLLM, request: int) -> int:
    return sum(
        1
        for message in server.chat_requests[request].body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    )


async def test_mention_and_image_command_in_plain_mode(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    png(tmp_path / "shot.png")
    png(tmp_path / "other.png")
    fake_llm.add(Reply(text="Blue."), Reply(text="Also blue."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("what is @shot.png\r")
    await plain.wait_for("── turn 1 · completed")
    plain.type("/image other.png and this one?\r")
    text = await plain.wait_for("── turn 2 · completed")
    assert await plain.quit() == 0
    assert "[image shot.png 40x30" in text
    assert "[image other.png 40x30" in text
    assert image_parts(fake_llm, 0) == 1
    assert image_parts(fake_llm, 1) == 2  # the first image again, with the new one


async def test_a_model_without_vision_refuses_in_plain_mode(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    png(tmp_path / "shot.png")
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("/model deepseek-v4-pro\r")
    await plain.wait_for("deepseek-v4-pro")
    plain.type("what is @shot.png\r")
    text = await plain.wait_for("does not take images")
    plain.type("/image shot.png\r")
    text = await plain.wait_for("does not take images", count=2)
    assert await plain.quit() == 0
    assert fake_llm.chat_requests == []
    assert "Your message is in the prompt history" in text
