"""Session titles, in a real runtime against the scripted server: the fallback at once,
the model's title in the background, ``/title`` pinning, and headless runs paying for
nothing they did not ask for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent
from dsh.commands import CommandContext
from dsh.frontend import shown_in
from dsh.llm import UserMessage, UserSource, user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import COMMANDS
from dsh.session import check_log, session_spend
from dsh.testing import FakeLLM, Fault, Reply
from dsh.ui.entries import TranscriptFold
from dsh_plugins.title import (
    SERVICE,
    SessionTitle,
    SessionTitleRequest,
    TitleService,
    clean_title,
    fallback_title,
)
from dsh_plugins.title.text import SYSTEM
from tests.support.command_host import RecordingHost

PROMPT = "Please fix the CSV parser in src/csv.py: it splits quoted fields on their commas"


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url, "retry": {"max_retries": 0}}
        },
    )
    yield started
    await started.aclose()


async def agent_for(runtime: Runtime, cwd: Path, *, interactive: bool) -> Agent:
    """An agent as the TUI shows it (titled by itself), or as a script runs it."""
    agent = await runtime.agents.create(cwd)
    if interactive:
        shown_in(agent.ctx, "tui")
    return agent


def titles_of(agent: Agent) -> list[SessionTitle]:
    return [e.data for e in agent.session.events if isinstance(e.data, SessionTitle)]


def service(runtime: Runtime) -> TitleService:
    titles = runtime.root.get(SERVICE)
    assert isinstance(titles, TitleService)
    return titles


async def run_turn(agent: Agent, text: str = PROMPT) -> None:
    agent.followup(user_text(text))
    await asyncio.wait_for(agent.when_idle(), 10)


async def command(runtime: Runtime, agent: Agent, line: str) -> RecordingHost:
    host = RecordingHost()
    assert await runtime.root.get(COMMANDS).run(line, CommandContext(agent, runtime.root, host))
    return host


def is_title_request(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0] == {"role": "system", "content": SYSTEM})


async def test_an_interactive_session_gets_a_fallback_then_the_models_title(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Fixed: quoted fields keep their commas now."))
    fake_llm.add(Reply(text='**"Fix the CSV parser\'s quoted fields."**\n\nHope that helps!'))
    agent = await agent_for(runtime, tmp_path, interactive=True)
    await run_turn(agent)

    # The fallback is there the moment the agent is idle: the picker never waits.
    [fallback] = titles_of(agent)
    assert fallback.source == "fallback"
    assert fallback.title == "Please fix the CSV parser in src/csv.py: it…"
    prompt_seq = next(
        e.seq
        for e in agent.session.events
        if isinstance(e.data, UserMessage) and isinstance(e.data.source, UserSource)
    )
    assert fallback.message_seqs == (prompt_seq,)

    settled = await asyncio.wait_for(service(runtime).settle(agent), 10)
    assert settled is not None
    assert (settled.title, settled.source) == ("Fix the CSV parser's quoted fields", "provider")
    assert [t.source for t in titles_of(agent)] == ["fallback", "provider"]
    # The title call is paid for: its usage is logged and counted with the rest.
    assert (settled.provider, settled.model) == ("deepseek", "deepseek-flash")
    assert settled.usage is not None
    assert settled.usage.output_tokens > 0
    spent = session_spend(agent.session.events, runtime.llm.cost)
    assert spent.calls == 2
    fold = TranscriptFold(cost=runtime.llm.cost)
    for event in agent.session.events:
        fold.apply(event)
    assert fold.status.cost == spent.cost
    assert spent.cost is not None
    assert spent.cost > 0

    conversation, title_call = fake_llm.chat_requests
    assert not is_title_request(conversation.body)
    body = title_call.body
    assert is_title_request(body)
    assert body["max_tokens"] == 64
    assert body["thinking"] == {"type": "disabled"}  # thinking off for titles
    assert "tools" not in body
    [question] = body["messages"][1:]
    assert PROMPT in question["content"]
    assert "quoted fields keep their commas" in question["content"]

    [request] = [e for e in agent.session.events if isinstance(e.data, SessionTitleRequest)]
    assert (request.data.provider, request.data.model) == ("deepseek", "deepseek-flash")
    answer_seq = next(e.seq for e in agent.session.events if e.type == "assistant/message")
    assert request.data.message_seqs == (prompt_seq, answer_seq)
    assert settled.message_seqs == (prompt_seq, answer_seq)
    # Nothing of the title call entered the conversation.
    assert all(m.text() != settled.title for m in agent.session.derive_messages())
    assert check_log(agent.session.events) == []

    # The picker lists it.
    await runtime.sessions.flush(agent.session)
    await runtime.sessions.indexed()
    entry = await runtime.sessions.latest(str(tmp_path))
    assert entry is not None
    assert entry.display_title == "Fix the CSV parser's quoted fields"

    # A later turn neither asks again nor renames, nor does a resumed session.
    fake_llm.add(Reply(text="Done again."))
    await run_turn(agent, "and add a test")
    await service(runtime).settle(agent)
    assert len(fake_llm.chat_requests) == 3
    await runtime.agents.dispose(agent)
    resumed = await runtime.agents.resume(agent.id, agent.options)
    fake_llm.add(Reply(text="Done once more."))
    await run_turn(resumed, "one more")
    await service(runtime).settle(resumed)
    assert len(fake_llm.chat_requests) == 4
    assert [t.source for t in titles_of(resumed)] == ["fallback", "provider"]


async def test_a_headless_style_agent_makes_only_its_conversations_requests(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Done."))
    agent = await agent_for(runtime, tmp_path, interactive=False)
    await run_turn(agent)
    assert await service(runtime).settle(agent) is None
    await asyncio.sleep(0.05)  # nothing runs in the background either
    assert len(fake_llm.chat_requests) == 1
    assert titles_of(agent) == []
    assert not any(isinstance(e.data, SessionTitleRequest) for e in agent.session.events)


async def test_a_title_set_by_hand_is_pinned(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await agent_for(runtime, tmp_path, interactive=True)
    host = await command(runtime, agent, "/title")
    assert host.texts == ["This session has no title yet."]

    host = await command(runtime, agent, "/title   My   name ")
    assert host.texts == ["Title set: My name"]
    fake_llm.add(Reply(text="Done."))
    await run_turn(agent)
    await service(runtime).settle(agent)
    assert len(fake_llm.chat_requests) == 1  # pinned: no fallback, no request
    assert [(t.title, t.source) for t in titles_of(agent)] == [("My name", "user")]
    host = await command(runtime, agent, "/title")
    assert host.texts == ["Title: My name (user)"]
    runs = [e.data.name for e in agent.session.events if e.type == "command/run"]
    assert runs == ["title", "title", "title"]


async def test_a_rename_during_the_request_wins(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Done."))
    fake_llm.add(Reply(text="Model title", first_byte_delay_ms=300))
    agent = await agent_for(runtime, tmp_path, interactive=True)
    await run_turn(agent)
    await command(runtime, agent, "/title Mine")
    final = await asyncio.wait_for(service(runtime).settle(agent), 10)
    assert len(fake_llm.chat_requests) == 2  # the request was made...
    assert final is not None
    assert (final.title, final.source) == ("Mine", "user")  # ...and its answer dropped
    assert [t.source for t in titles_of(agent)] == ["fallback", "user"]


async def test_a_failed_request_keeps_the_fallback(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.add(Reply(text="Done."))
    fake_llm.add(Reply(fault=Fault(status=400)))
    agent = await agent_for(runtime, tmp_path, interactive=True)
    with caplog.at_level(logging.WARNING, logger="dsh.plugins.title"):
        await run_turn(agent, "rename the widget")
        final = await asyncio.wait_for(service(runtime).settle(agent), 10)
    assert final is not None
    assert (final.title, final.source) == ("rename the widget", "fallback")
    assert len(fake_llm.chat_requests) == 2
    assert "no title from deepseek/deepseek-flash" in caplog.text


async def test_generation_can_be_switched_off(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    runtime = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"generate": False},
        },
    )
    try:
        fake_llm.add(Reply(text="Done."))
        agent = await agent_for(runtime, tmp_path, interactive=True)
        await run_turn(agent, "short one")
        await service(runtime).settle(agent)
        assert [(t.title, t.source) for t in titles_of(agent)] == [("short one", "fallback")]
        assert len(fake_llm.chat_requests) == 1
    finally:
        await runtime.aclose()


@pytest.mark.parametrize(
    ("auto", "interactive", "titled"),
    [
        ("always", False, True),  # a headless run is titled too
        ("never", True, False),  # only /title, and title_now, title it
        ("interactive", False, False),
    ],
)
async def test_the_plugins_auto_setting_says_which_sessions_are_titled(
    tmp_path: Path,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    auto: str,
    interactive: bool,
    titled: bool,
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    runtime = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"auto": auto, "generate": False},
        },
    )
    try:
        fake_llm.add(Reply(text="Done."))
        agent = await agent_for(runtime, tmp_path, interactive=interactive)
        await run_turn(agent, "short one")
        await service(runtime).settle(agent)
        assert bool(titles_of(agent)) is titled
        # `dsh -p --title` asks, whatever the setting; once titled, it asks no more.
        title = await service(runtime).title_now(agent)
        assert title is not None
        assert (title.title, title.source) == ("short one", "fallback")
        await service(runtime).title_now(agent)
        assert len(titles_of(agent)) == 1
        assert len(fake_llm.chat_requests) == 1
    finally:
        await runtime.aclose()


async def test_an_unfinished_first_turn_waits_for_a_completed_one(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(fault=Fault(status=400)))  # the first turn fails
    agent = await agent_for(runtime, tmp_path, interactive=True)
    await run_turn(agent, "first try")
    assert titles_of(agent) == []
    fake_llm.add(Reply(text="Done."), Reply(text="Second try"))
    await run_turn(agent, "second try")
    await service(runtime).settle(agent)
    # The fallback still quotes the session's first prompt.
    assert [(t.title, t.source) for t in titles_of(agent)] == [
        ("first try", "fallback"),
        ("Second try", "provider"),
    ]


def test_titles_are_cleaned_and_cut() -> None:
    assert clean_title('  "Fix the parser."  ') == "Fix the parser"
    assert clean_title("Title: `Speed up CI`\nBecause...") == "Speed up CI"
    assert clean_title("# **Refactor the loop**") == "Refactor the loop"
    assert clean_title("- «Übersetzung prüfen»") == "Übersetzung prüfen"
    assert clean_title("Title-based search") == "Title-based search"
    assert clean_title("Title — Speed up CI") == "Speed up CI"
    assert clean_title("__init__ cleanup") == "__init__ cleanup"
    assert clean_title(" \n ") is None
    long = clean_title("word " * 30)
    assert long is not None
    assert len(long) <= 60
    assert long.endswith("…")
    assert fallback_title("  hello\n\tthere ") == "hello there"
    assert fallback_title("") is None
    cut = fallback_title("a" * 80)
    assert cut is not None
    assert len(cut) == 50
