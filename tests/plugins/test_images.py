"""Images: attached with @mentions and /image, stored once beside the log, replayed
from there, refused before anything is sent for a model without vision, and read by
the read tool; every request checked as the scripted server received it."""

from __future__ import annotations

import base64
import io
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from dsh.agent import Agent
from dsh.commands import CommandContext
from dsh.hooks import PROMPT_PASTE
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import COMMANDS
from dsh.session import check_log
from dsh.testing import FakeLLM, Reply
from dsh.testing.script import ToolCallSpec
from dsh_plugins._shared.images import MAX_SIDE, ImageError, prepare
from tests.support.command_host import RecordingHost


def png(path: Path, size: tuple[int, int] = (64, 32), color: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


async def start(tmp_path: Path, project: Path, fake_llm: FakeLLM) -> Runtime:
    return await start_runtime(
        home=tmp_path / "home",
        cwd=project,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"generate": False},
        },
    )


@pytest.fixture
async def runtime(
    tmp_path: Path, project: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started = await start(tmp_path, project, fake_llm)
    yield started
    await started.aclose()


def image_urls(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def turn(
    runtime: Runtime,
    fake_llm: FakeLLM,
    cwd: Path,
    prompt: str,
    *,
    model: str = "deepseek-flash",
    scripted: bool = False,
) -> Agent:
    agent = await runtime.agents.create(cwd, runtime.agents.defaults)
    agent.set_options(model=model)
    if not scripted:
        fake_llm.add(Reply(text="Seen."))
    agent.followup(user_text(prompt))
    await agent.when_idle()
    await agent.flush()
    return agent


async def test_a_mentioned_image_goes_as_an_image_url_block(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    data = png(project / "shot.png")
    agent = await turn(runtime, fake_llm, project, "what is in @shot.png?")
    [request] = fake_llm.chat_requests
    assert request.body["model"] == "deepseek-flash"
    [url] = image_urls(request.body)
    assert url == "data:image/png;base64," + base64.b64encode(data).decode()
    # The log holds the digest, never the bytes.
    stored = await runtime.sessions.persistence.inspect(agent.session.id)
    assert check_log(stored.events) == []
    raw = str([e.to_dict() for e in stored.events])
    assert base64.b64encode(data).decode()[:40] not in raw
    [attached] = [e for e in agent.session.events if e.type == "images/attached"]
    assert (attached.data.image.width, attached.data.image.height) == (64, 32)


def blob_files(runtime: Runtime, agent: Agent) -> list[Path]:
    blobs = runtime.sessions.blobs(agent.id)
    assert blobs is not None
    return sorted(p for p in blobs.folder.iterdir() if not p.name.startswith("."))


async def test_a_model_without_vision_is_refused_before_anything_is_sent(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    png(project / "shot.png")
    agent = await runtime.agents.create(project, runtime.agents.defaults)
    agent.set_options(model="deepseek-v4-pro")
    agent.followup(user_text("what is in @shot.png?"))
    await agent.when_idle()
    assert fake_llm.chat_requests == []  # no request at all
    [blocked] = [e for e in agent.session.events if e.type == "inbox/discarded"]
    assert blocked.data.reason == "blocked"
    assert "deepseek-v4-pro does not take images" in (blocked.data.detail or "")
    assert "@shot.png" in (blocked.data.detail or "")
    # The prompt is kept in the log (and so in the prompt history), not lost.
    [queued] = [e for e in agent.session.events if e.type == "inbox/enqueued"]
    assert "what is in @shot.png?" in str(queued.to_dict())
    assert not [e for e in agent.session.events if e.type == "images/attached"]


async def test_an_image_referenced_twice_is_stored_once_and_sent_each_time(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    data = png(project / "shot.png")
    (project / "copy.png").write_bytes(data)
    agent = await turn(runtime, fake_llm, project, "compare @shot.png with @copy.png")
    fake_llm.add(Reply(text="Again."))
    agent.followup(user_text("and @shot.png once more"))
    await agent.when_idle()
    assert len(blob_files(runtime, agent)) == 1
    assert len(image_urls(fake_llm.chat_requests[0].body)) == 2
    assert len(image_urls(fake_llm.chat_requests[1].body)) == 3  # history replays them


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
async def test_a_resumed_session_replays_the_image_from_its_blob(
    tmp_path: Path,
    project: Path,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.toml").write_text(f'[storage]\nbackend = "{backend}"\n')
    data = png(project / "shot.png")
    first = await start(tmp_path, project, fake_llm)
    agent = await turn(first, fake_llm, project, "look at @shot.png")
    session_id = agent.id
    assert first.sessions.persistence.name == backend
    [stored_blob] = blob_files(first, agent)
    await first.aclose()
    (project / "shot.png").unlink()  # only the stored copy is left
    second = await start(tmp_path, project, fake_llm)
    try:
        resumed = await second.agents.resume(session_id)
        fake_llm.add(Reply(text="Still red."))
        resumed.followup(user_text("what colour was it?"))
        await resumed.when_idle()
    finally:
        await second.aclose()
    [url] = image_urls(fake_llm.chat_requests[-1].body)
    assert url.endswith(base64.b64encode(data).decode())
    if backend == "jsonl":
        assert stored_blob.parent.parent.joinpath("session.jsonl").is_file()  # beside the log
    else:
        assert stored_blob.parent.parent.parent.joinpath("sessions.sqlite").is_file()


async def test_a_missing_blob_goes_as_a_placeholder_with_a_notice(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    png(project / "shot.png")
    agent = await turn(runtime, fake_llm, project, "look at @shot.png")
    for path in blob_files(runtime, agent):
        path.unlink()
    fake_llm.add(Reply(text="I cannot see it."))
    agent.followup(user_text("and now?"))
    await agent.when_idle()
    body = fake_llm.chat_requests[-1].body
    assert image_urls(body) == []
    assert "its stored copy is missing" in str(body["messages"])
    assert check_log(agent.session.events) == []
    fake_llm.add(Reply(text="Still not."))
    agent.followup(user_text("and now?"))
    await agent.when_idle()
    assert "its stored copy is missing" in str(fake_llm.chat_requests[-1].body["messages"])
    [missing] = [e for e in agent.session.events if e.type == "images/missing"]  # told once
    assert missing.data.name == "shot.png"
    [end] = [e for e in agent.session.events if e.type == "turn/end"][-1:]
    assert end.data.reason.kind == "completed"


async def test_hostile_mentions_get_clear_notes_and_nothing_is_read(
    runtime: Runtime, fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    (project / "fake.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really an image" * 10)
    huge = project / "huge.png"
    with huge.open("wb") as handle:  # sparse: a PNG signature, then 60 MB of nothing
        handle.write(b"\x89PNG\r\n\x1a\n")
        handle.truncate(60 * 1024 * 1024)
    secret = tmp_path / "outside" / "id_rsa"
    secret.parent.mkdir()
    secret.write_bytes(b"\x89PNG\r\n\x1a\nSECRET-KEY-MATERIAL")
    os.symlink(secret, project / "key.png")
    agent = await turn(runtime, fake_llm, project, "see @fake.png @huge.png @key.png")
    body = fake_llm.chat_requests[-1].body
    sent = str(body["messages"])
    assert image_urls(body) == []
    assert "SECRET-KEY-MATERIAL" not in sent
    assert "@fake.png: fake.png cannot be decoded as an image" in sent
    assert "@huge.png: huge.png is 60.0 MB, over the 50.0 MB limit" in sent
    assert "@key.png: outside the working directory, so not read" in sent
    blobs = runtime.sessions.blobs(agent.id)
    assert blobs is not None
    assert not blobs.folder.exists()  # nothing was stored


async def test_a_large_image_is_scaled_down_under_the_limit(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    png(project / "big.png", size=(4096, 1024))
    agent = await turn(runtime, fake_llm, project, "look at @big.png")
    [attached] = [e for e in agent.session.events if e.type == "images/attached"]
    assert attached.data.scaled
    assert (attached.data.image.width, attached.data.image.height) == (MAX_SIDE, 512)
    [url] = image_urls(fake_llm.chat_requests[-1].body)
    decoded = base64.b64decode(url.split(",", 1)[1])
    with Image.open(io.BytesIO(decoded)) as image:
        assert image.size == (MAX_SIDE, 512)


async def test_the_image_command_attaches_and_refuses_secrets(
    runtime: Runtime,
    fake_llm: FakeLLM,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    secret = home / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(b"SECRET-KEY-MATERIAL")
    os.symlink(secret, project / "innocent.png")
    data = png(tmp_path / "elsewhere" / "shot.png")
    agent = await runtime.agents.create(project, runtime.agents.defaults)
    commands = runtime.root.get(COMMANDS)
    host = RecordingHost()
    context = CommandContext(agent, runtime.root, host)
    await commands.run("/image innocent.png", context)
    [done] = [e for e in agent.session.events if e.type == "command/done"]
    assert done.data.kind == "error"
    assert "innocent.png: not read" in str(done.to_dict())
    assert not [e for e in agent.session.events if e.type == "images/attached"]
    fake_llm.add(Reply(text="A red box."))
    await commands.run(f"/image {tmp_path / 'elsewhere' / 'shot.png'} what is this?", context)
    await agent.when_idle()
    [request] = fake_llm.chat_requests
    assert "SECRET-KEY-MATERIAL" not in str(request.body)
    [url] = image_urls(request.body)
    assert url.endswith(base64.b64encode(data).decode())
    assert "what is this?" in str(request.body["messages"][-1])


async def test_the_read_tool_shows_an_image_to_a_vision_model_only(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    data = png(project / "shot.png")
    for model in ("deepseek-flash", "deepseek-v4-pro"):
        fake_llm.add(
            Reply(tool_calls=[ToolCallSpec(name="read", arguments={"file_path": "shot.png"})]),
            Reply(text="Done."),
        )
        start = len(fake_llm.chat_requests)
        agent = await turn(runtime, fake_llm, project, "read shot.png", model=model, scripted=True)
        assert check_log(agent.session.events) == []
        body = fake_llm.chat_requests[start + 1].body
        messages = body["messages"]
        [tool] = [m for m in messages if m["role"] == "tool"]
        if model == "deepseek-flash":
            assert "follows in the next message" in tool["content"]
            after = messages[messages.index(tool) + 1]
            assert after["role"] == "user"
            [part] = [p for p in after["content"] if p["type"] == "image_url"]
            assert part["image_url"]["url"].endswith(base64.b64encode(data).decode())
        else:
            assert image_urls(body) == []
            assert "a PNG image" in tool["content"]


async def test_compaction_summarises_an_image_as_a_note(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    png(project / "shot.png")
    agent = await turn(runtime, fake_llm, project, "look at @shot.png")
    fake_llm.add(Reply(text="It is red."))
    agent.followup(user_text("what colour is it?"))
    await agent.when_idle()
    fake_llm.add(Reply(text="Summary: the user showed a red box."))
    host = RecordingHost()
    await runtime.root.get(COMMANDS).run("/compact", CommandContext(agent, runtime.root, host))
    await agent.when_idle()
    summariser = fake_llm.chat_requests[-1].body
    assert image_urls(summariser) == []
    assert "[image shot.png]" in str(summariser["messages"])
    assert [e for e in agent.session.events if e.type == "compaction/end"]


async def test_a_pasted_image_path_is_staged_and_sent_with_the_prompt(
    runtime: Runtime, fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    data = png(tmp_path / "Screenshots" / "my shot.png")
    agent = await runtime.agents.create(project, runtime.agents.defaults)
    pasted = f"'{tmp_path / 'Screenshots' / 'my shot.png'}'"  # as a terminal drops a file
    result = await runtime.root.serial(PROMPT_PASTE, agent, pasted)
    assert result is not None
    assert result.text == "[image #1 my shot.png]"
    assert (result.notice or "").startswith("Attached [image my shot.png 64x32 ")
    # Ordinary text is left to the prompt.
    assert await runtime.root.serial(PROMPT_PASTE, agent, "hello world") is None
    fake_llm.add(Reply(text="A red box."))
    agent.followup(user_text(f"what is {result.text}?"))
    await agent.when_idle()
    [request] = fake_llm.chat_requests
    [url] = image_urls(request.body)
    assert url.endswith(base64.b64encode(data).decode())


async def test_ctrl_v_reads_the_clipboard_program_or_says_what_to_install(
    runtime: Runtime,
    fake_llm: FakeLLM,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = await runtime.agents.create(project, runtime.agents.defaults)
    empty = tmp_path / "bin-empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    result = await runtime.root.serial(PROMPT_PASTE, agent, None)
    assert result is not None
    assert result.level == "warning"
    assert "install wl-clipboard" in (result.notice or "")
    # A real clipboard program (a script standing in for wl-paste) gives the image.
    data = png(tmp_path / "clip.png")
    tools = tmp_path / "bin"
    tools.mkdir()
    script = tools / "wl-paste"
    script.write_text(f"#!/bin/sh\nexec cat '{tmp_path / 'clip.png'}'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    result = await runtime.root.serial(PROMPT_PASTE, agent, None)
    assert result is not None
    assert result.text == "[image #1 clipboard.png]"
    fake_llm.add(Reply(text="Seen."))
    agent.followup(user_text(f"{result.text} what is this"))
    await agent.when_idle()
    [url] = image_urls(fake_llm.chat_requests[-1].body)
    assert url.endswith(base64.b64encode(data).decode())


async def test_tool_images_follow_every_tool_message_of_the_step(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    png(project / "shot.png")
    (project / "notes.txt").write_text("red box\n")
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="read", arguments={"file_path": "shot.png"}),
                ToolCallSpec(name="read", arguments={"file_path": "notes.txt"}),
            ]
        ),
        Reply(text="Both read."),
    )
    await turn(runtime, fake_llm, project, "read both", scripted=True)
    roles = [m["role"] for m in fake_llm.chat_requests[1].body["messages"]]
    # The tool messages directly follow their call; the image comes after both.
    assert roles[-4:] == ["assistant", "tool", "tool", "user"]
    assert len(image_urls(fake_llm.chat_requests[1].body)) == 1


async def test_the_read_tool_asks_before_a_secret_named_like_an_image(
    runtime: Runtime,
    fake_llm: FakeLLM,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    secret = home / ".ssh" / "id_rsa"
    data = png(secret)  # a real image, so only the permission check keeps it back
    os.symlink(secret, project / "shot.png")
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="read", arguments={"file_path": "shot.png"})]),
        Reply(text="Could not."),
    )
    agent = await turn(runtime, fake_llm, project, "read shot.png", scripted=True)
    body = str(fake_llm.chat_requests[1].body)
    assert base64.b64encode(data).decode()[:40] not in body
    assert image_urls(fake_llm.chat_requests[1].body) == []
    assert not [e for e in agent.session.events if e.type == "images/attached"]
    [result] = [e for e in agent.session.events if e.type == "tool/result"]
    assert result.data.message.result.is_error
    assert "it holds your SSH keys" in str(result.data.message.result.content)


@pytest.mark.parametrize(
    ("format_", "media"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
def test_the_four_formats_are_told_by_their_bytes(format_: str, media: str) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (20, 10), "green").save(buffer, format_)
    prepared = prepare(buffer.getvalue(), "picture.txt")  # the name says nothing
    assert (prepared.media_type, prepared.width, prepared.height) == (media, 20, 10)
    assert not prepared.scaled


def test_what_is_not_an_image_or_too_big_to_decode_is_refused() -> None:
    with pytest.raises(ImageError, match="is not a JPEG, PNG, GIF or WebP image"):
        prepare(b"%PDF-1.7 not an image", "doc.png")
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "BMP")  # an image, but not one models take
    with pytest.raises(ImageError, match="is not a JPEG, PNG, GIF or WebP image"):
        prepare(buffer.getvalue(), "old.png")
    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, "PNG")  # small file, 144M pixels
    with pytest.raises(ImageError, match="too large to decode"):
        prepare(bomb.getvalue(), "bomb.png")


def _chunk(kind: bytes, body: bytes, *, crc: int | None = None) -> bytes:
    checksum = zlib.crc32(kind + body) if crc is None else crc
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", checksum)


def _with_chunk(png_bytes: bytes, chunk: bytes) -> bytes:
    """``chunk`` put right after IHDR (8 signature bytes, 25 of IHDR)."""
    return png_bytes[:33] + chunk + png_bytes[33:]


def test_a_damaged_ancillary_chunk_is_dropped_as_viewers_do() -> None:
    """server-everything's get-tiny-image carries a text chunk whose CRC is wrong:
    viewers skip such a chunk (only a critical chunk's damage makes a PNG unreadable)."""
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), "red").save(buffer, "PNG")
    damaged = _with_chunk(buffer.getvalue(), _chunk(b"tEXt", b"Comment\x00hi", crc=0x1234))

    prepared = prepare(damaged, "tiny.png")

    assert (prepared.media_type, prepared.width, prepared.height) == ("image/png", 4, 3)
    assert b"tEXt" not in prepared.data  # what the model gets is a sound PNG
    with Image.open(io.BytesIO(prepared.data)) as image:
        image.load()
        assert image.getpixel((0, 0)) == (255, 0, 0)


def test_a_damaged_critical_chunk_is_still_refused() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), "red").save(buffer, "PNG")
    sound = buffer.getvalue()
    at = sound.index(b"IDAT") - 4
    length = struct.unpack(">I", sound[at : at + 4])[0]
    crc_at = at + 8 + length
    damaged = sound[:crc_at] + bytes(4) + sound[crc_at + 4 :]

    with pytest.raises(ImageError, match=r"broken\.png is a damaged PNG: its IDAT chunk fails"):
        prepare(damaged, "broken.png")


async def test_a_fork_gets_its_own_copy_and_a_delete_removes_them(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    png(project / "shot.png")
    agent = await turn(runtime, fake_llm, project, "look at @shot.png")
    [original] = blob_files(runtime, agent)
    fork = await runtime.sessions.fork(agent.id)
    copy = runtime.sessions.blobs(fork.id)
    assert copy is not None
    assert copy.folder != original.parent
    assert copy.get(original.name) == original.read_bytes()
    await runtime.sessions.close(fork)
    await runtime.sessions.delete(fork.id)
    assert not copy.folder.exists()
    assert original.exists()


async def test_a_pasted_secret_named_like_an_image_is_refused_unread(
    runtime: Runtime, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    secret = home / ".ssh" / "id_rsa"
    png(secret)  # an image, so only the protection keeps it back
    os.symlink(secret, tmp_path / "shot.png")
    agent = await runtime.agents.create(project, runtime.agents.defaults)
    result = await runtime.root.serial(PROMPT_PASTE, agent, str(tmp_path / "shot.png"))
    assert result is not None
    assert result.level == "error"
    assert "shot.png: not read" in (result.notice or "")
    assert not [e for e in agent.session.events if e.type == "images/attached"]
    blobs = runtime.sessions.blobs(agent.id)
    assert blobs is not None
    assert not blobs.folder.exists()
    # A secret's path pasted as text stays text.
    assert await runtime.root.serial(PROMPT_PASTE, agent, str(secret)) is None


def sessions_cli(
    home: Path, *args: str, backend: str = "jsonl"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSH_HOME": str(home), "DSH_STORAGE__BACKEND": backend}
    return subprocess.run(
        [sys.executable, "-m", "dsh", "sessions", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


async def test_an_export_carries_its_images_into_an_import(
    tmp_path: Path, project: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    data = png(project / "shot.png")
    first = await start(tmp_path, project, fake_llm)
    agent = await turn(first, fake_llm, project, "look at @shot.png")
    session_id = agent.id
    await first.aclose()
    export = tmp_path / "out" / "s.jsonl"
    export.parent.mkdir()
    done = sessions_cli(tmp_path / "home", "export", session_id, "-o", str(export))
    assert done.returncode == 0, done.stderr
    assert [p.read_bytes() for p in (tmp_path / "out" / "s.jsonl.blobs").iterdir()] == [data]
    other = tmp_path / "other"
    done = sessions_cli(other, "import", str(export), backend="sqlite")
    assert done.returncode == 0, done.stderr
    [stored] = (other / "blobs").glob("*/*")
    assert stored.read_bytes() == data
