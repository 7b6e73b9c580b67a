"""``@path`` mentions: a real runtime and the scripted server. What the model receives
holds the mentioned files' contents, folders' listings and notes for what was left out,
and every request is rebuilt from the stored log alone."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent
from dsh.llm import PluginSource, UserMessage, UserSource, user_text
from dsh.runtime import Runtime, start_runtime
from dsh.session import check_log
from dsh.testing import FakeLLM, Reply
from dsh.testing.reconstruct import check_requests
from dsh_plugins._shared.chat_completions import ChatModel, request_body
from dsh_plugins.llm_deepseek import DEFAULT_MODELS
from dsh_plugins.mentions import mentions
from dsh_plugins.mentions.attach import folder_listing

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
async def runtime(
    tmp_path: Path, project: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=project,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"generate": False},
        },
    )
    yield started
    await started.aclose()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def user_texts(body: dict[str, Any]) -> list[str]:
    return [text_of(m) for m in body["messages"] if m["role"] == "user"]


def mention_messages(agent: Agent) -> list[UserMessage]:
    return [
        e.data
        for e in agent.session.events
        if e.type == "user/message"
        and isinstance(e.data, UserMessage)
        and isinstance(e.data.source, PluginSource)
        and e.data.source.plugin == "mentions"
    ]


async def ask(runtime: Runtime, fake_llm: FakeLLM, cwd: Path, prompt: str) -> tuple[Agent, str]:
    """One turn with ``prompt``; the agent, and every user message the model got, joined."""
    fake_llm.add(Reply(text="Looked."))
    agent = await runtime.agents.create(cwd, runtime.agents.defaults)
    agent.followup(user_text(prompt))
    await agent.when_idle()
    [end] = [e for e in agent.session.events if e.type == "turn/end"]
    assert end.data.reason.kind == "completed"
    await agent.flush()
    stored = await runtime.sessions.persistence.inspect(agent.session.id)
    assert [e.to_dict() for e in stored.events] == [e.to_dict() for e in agent.session.events]
    assert check_log(stored.events) == []
    check_requests(
        stored.events,
        [r.body for r in fake_llm.chat_requests],
        lambda o: request_body(o, DEFAULT_MODELS.get(o.model, ChatModel())),
    )
    body = fake_llm.chat_requests[-1].body
    texts = user_texts(body)
    assert prompt in texts  # the prompt itself goes unchanged
    return agent, "\n".join(texts)


async def test_a_mentioned_file_goes_to_the_model_with_the_prompt(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    write(project / "src" / "app.py", "def main():\n    return 'MARKER-42'\n")

    agent, sent = await ask(runtime, fake_llm, project, "explain @src/app.py, please")

    assert "<file path=\"src/app.py\">\ndef main():\n    return 'MARKER-42'\n</file>" in sent
    [attached] = mention_messages(agent)
    assert isinstance(attached.source, PluginSource)
    assert attached.source.form == "snapshot"
    prompts = [
        e.data
        for e in agent.session.events
        if isinstance(e.data, UserMessage) and isinstance(e.data.source, UserSource)
    ]
    assert [p.text() for p in prompts] == ["explain @src/app.py, please"]
    # The attachment follows the prompt in the log, and so in the request.
    body_texts = user_texts(fake_llm.chat_requests[-1].body)
    assert body_texts.index("explain @src/app.py, please") < len(body_texts) - 1
    assert "MARKER-42" in body_texts[-1]


async def test_a_mentioned_folder_attaches_a_listing_without_ignored_entries(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    write(project / ".gitignore", "build/\n*.log\n")
    write(project / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(project / "src" / "a.py", "a = 1\n")
    write(project / "src" / "pkg" / "b.py", "b = 2\n")
    write(project / "src" / "debug.log", "noise\n")
    write(project / "build" / "out.txt", "built\n")

    agent, sent = await ask(runtime, fake_llm, project, "what is in @src/ and in @.?")

    [src, top] = [m.text() for m in mention_messages(agent)]
    assert "src/a.py\nsrc/pkg/\nsrc/pkg/b.py" in src
    assert "debug.log" not in src
    for entry in (".gitignore", "src/", "src/a.py", "src/pkg/b.py"):
        assert entry in top.splitlines()
    for left_out in ("build/", "build/out.txt", ".git/", ".git/HEAD", "src/debug.log"):
        assert left_out not in top.splitlines()
    assert "a = 1" not in sent  # a listing, not contents


def test_a_long_listing_is_cut_and_says_so(tmp_path: Path) -> None:
    for n in range(10):
        write(tmp_path / f"f{n}.txt", "")
    listing = folder_listing(tmp_path, tmp_path, 4).splitlines()
    assert listing[:4] == ["f0.txt", "f1.txt", "f2.txt", "f3.txt"]
    assert listing[4].startswith("… and more, left out: only the first 4 entries")


async def test_mentions_that_cannot_be_attached_get_a_note_not_an_error(
    runtime: Runtime, fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    write(tmp_path / "secret.txt", f"{SECRET}\n")
    os.symlink(tmp_path / "secret.txt", project / "link.txt")
    write(project / "big.txt", "x" * 300_000)
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    prompt = (
        "look at @missing.py, @../secret.txt, @link.txt, @big.txt, @logo.png "
        f"and @{tmp_path / 'secret.txt'}"
    )

    agent, sent = await ask(runtime, fake_llm, project, prompt)

    assert SECRET not in sent
    assert "x" * 1000 not in sent
    [note] = [m.text() for m in mention_messages(agent)]
    lines = note.splitlines()
    assert "- @missing.py: no such file or folder in the working directory" in lines
    assert "- @../secret.txt: outside the working directory, so not read" in lines
    assert "- @link.txt: outside the working directory, so not read" in lines
    assert f"- @{tmp_path / 'secret.txt'}: outside the working directory, so not read" in lines
    assert any(
        line.startswith("- @big.txt: 293 KB, over the 256 KB limit for a mention") for line in lines
    )
    # A PNG signature on a file that is not a whole image: refused as an image.
    assert any(
        line.startswith("- @logo.png: logo.png cannot be decoded as an image") for line in lines
    )
    assert note in sent


async def test_words_that_are_not_paths_are_left_alone(
    runtime: Runtime, fake_llm: FakeLLM, project: Path
) -> None:
    agent, _ = await ask(
        runtime, fake_llm, project, "why use @dataclass here? mail bob@example.com"
    )
    assert mention_messages(agent) == []


def test_mentions_are_found_after_whitespace_only() -> None:
    text = "@a.py then (@b.py) and c@d.py\n@e/ @a.py again, @f.py."
    assert mentions(text) == ["a.py", "e/", "f.py."]
