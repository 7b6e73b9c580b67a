"""Images in the real ``dsh`` TUI under tmux: ``@shot.png`` sent to a vision model as
an ``image_url`` block, and a path pasted as a terminal pastes it (bracketed) turned
into an attached image; the screen read back, the requests read at the server."""

from __future__ import annotations

import base64
import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from dsh.testing import FakeLLM, Reply
from tests.support.tmux import SESSION, TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def png(path: Path) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), "red").save(buffer, "PNG")
    path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


def image_urls(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def start(tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal, **extra: str) -> Path:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
    await terminal.start(command, project, {**child_env(home, fake_llm), **extra})
    await terminal.wait_for(says("/help lists commands"))
    return project


async def test_a_mentioned_image_in_the_real_tui(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(text="A red rectangle."))
    project = await start(tmp_path, fake_llm, terminal)
    data = png(project / "shot.png")
    # A word after the mention: the @path completion menu is closed by then.
    await terminal.keys("what is in @shot.png please", literal=True)
    await terminal.keys("Enter")
    screen = await terminal.wait_for("turn 1 · completed")
    assert "[image shot.png 64x32" in screen
    assert "A red rectangle." in screen
    [request] = fake_llm.chat_requests
    assert request.body["model"] == "deepseek-flash"
    [url] = image_urls(request.body)
    assert url == "data:image/png;base64," + base64.b64encode(data).decode()


async def test_a_pasted_image_path_in_the_real_tui(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(text="Red."))
    project = await start(tmp_path, fake_llm, terminal)
    data = png(tmp_path / "dropped.png")
    await terminal.tmux("set-buffer", "-b", "drop", str(tmp_path / "dropped.png"))
    await terminal.tmux("paste-buffer", "-p", "-b", "drop", "-t", SESSION)
    await terminal.wait_for("[image #1 dropped.png]")
    # The notice is drawn after the prompt takes the placeholder: wait for it too.
    await terminal.wait_for("Attached [image dropped.png 64x32")
    await terminal.keys(" which colour?", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for("turn 1 · completed")
    [request] = fake_llm.chat_requests
    [url] = image_urls(request.body)
    assert url.endswith(base64.b64encode(data).decode())
    assert project.is_dir()


async def test_ctrl_v_attaches_the_clipboard_image_in_the_real_tui(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(Reply(text="Red."))
    data = png(tmp_path / "clip.png")
    tools = tmp_path / "bin"
    tools.mkdir()
    script = tools / "wl-paste"  # stands in for the desktop's clipboard program
    script.write_text(f"#!/bin/sh\nexec cat '{tmp_path / 'clip.png'}'\n")
    script.chmod(0o755)
    path = f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    await start(tmp_path, fake_llm, terminal, PATH=path, WAYLAND_DISPLAY="wayland-test")
    await terminal.keys("C-v")
    await terminal.wait_for("[image #1 clipboard.png]")
    await terminal.keys(" what is it", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for("turn 1 · completed")
    [request] = fake_llm.chat_requests
    [url] = image_urls(request.body)
    assert url.endswith(base64.b64encode(data).decode())
