"""The prompt cache, visible: what the cache saved in ``/cost``; what a model switch or
a compaction will make the next request read without the cache, said before that
request; and a hint after an idle longer than the provider keeps a prefix."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh.commands import CommandContext
from dsh.kernel import Candidate
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import COMMANDS
from dsh.session import CacheIdle, PrefixChanged, session_spend
from dsh.testing import FakeLLM, Reply, Usage
from dsh.ui.entries import TranscriptFold
from dsh.ui.render import render_status
from tests.support.command_host import RecordingHost
from tests.support.echo_tool import plugin as echo_plugin
from tests.support.waits import HANG_S


async def _turn(runtime: Runtime, agent: object, text: str) -> None:
    agent.followup(user_text(text))  # type: ignore[attr-defined]
    await asyncio.wait_for(agent.when_idle(), HANG_S)  # type: ignore[attr-defined]


async def _run(runtime: Runtime, agent: object, line: str) -> RecordingHost:
    host = RecordingHost()
    context = CommandContext(agent=agent, root=runtime.root, host=host)  # type: ignore[arg-type]
    assert await runtime.root.get(COMMANDS).run(line, context)
    return host


async def test_cost_and_the_status_bar_say_what_the_cache_saved(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(text="one", usage=Usage(prompt_tokens=40_000, completion_tokens=100)),
        Reply(
            text="two",
            usage=Usage(prompt_tokens=41_000, completion_tokens=100, cache_hit_tokens=40_000),
        ),
    )
    agent = await runtime.agents.create(tmp_path)
    fold = TranscriptFold(cost=runtime.llm.cost)
    agent.session.subscribe(fold.apply)
    await _turn(runtime, agent, "first")
    first = await _run(runtime, agent, "/cost")
    assert not any("saved" in text for text in first.texts)  # nothing cached yet
    await _turn(runtime, agent, "second")

    spent = session_spend(agent.session.events, runtime.llm.cost)
    assert spent.saved is not None
    # 40,000 tokens read from the cache instead of missing it, at deepseek-flash's prices
    # (hit $0.006, miss $0.30 per million; off peak both half).
    assert spent.saved > 0
    host = await _run(runtime, agent, "/cost")
    (said,) = host.texts
    assert "49% of input from the cache" in said
    assert f"the prompt cache saved ${spent.saved:.4f}" in said
    status = render_status(fold.status).plain
    assert f"cache 49% saved ${spent.saved:.4f}" in status


async def test_a_model_switch_says_what_the_next_request_reads_without_the_cache(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="one"), Reply(text="two"))
    agent = await runtime.agents.create(tmp_path)
    # Before any request nothing is cached: a switch costs nothing to say.
    quiet = await _run(runtime, agent, "/model deepseek-v4-pro")
    assert quiet.texts == ["Model: deepseek/deepseek-v4-pro from the next request on"]
    await _turn(runtime, agent, "first")

    host = await _run(runtime, agent, "/model deepseek-flash")
    (said,) = host.texts
    assert said.startswith("Model: deepseek/deepseek-flash from the next request on. ")
    assert "The new model starts the prompt cache over: its first request reads about " in said
    assert "tokens without the cache: about $" in said

    # The picker says it before the choice is made.
    picker = await _run(runtime, agent, "/model")
    ((title, _, _),) = picker.choices
    assert "switching starts the prompt cache over" in title

    # And the request itself is preceded by what changed.
    await _turn(runtime, agent, "second")
    changed = [e.data for e in agent.session.events if isinstance(e.data, PrefixChanged)]
    assert [[c.part for c in d.changes] for d in changed] == [["model"]]


async def test_a_compaction_says_the_cache_starts_over(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(text="one " * 200),
        Reply(text="two " * 200),
        Reply(text="Summary: two long answers."),
    )
    agent = await runtime.agents.create(tmp_path)
    await _turn(runtime, agent, "first")
    await _turn(runtime, agent, "second")
    host = await _run(runtime, agent, "/compact")
    said = " ".join(host.texts)
    assert "The prompt cache starts over: the next request reads about " in said


async def test_after_a_long_idle_the_next_request_says_the_cache_may_be_gone(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: object
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")  # type: ignore[attr-defined]
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))  # type: ignore[attr-defined]
    runtime = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={
            # The provider keeps an unused prefix a second, here.
            "llm-deepseek": {
                "base_url": fake_llm.base_url,
                "models": {"deepseek-flash": {"cache_idle_s": 1}},
            },
            "title": {"generate": False},
        },
    )
    try:
        await runtime.plugins.load([Candidate("echo", "tests", echo_plugin)])
        fake_llm.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
        agent = await runtime.agents.create(tmp_path)
        await _turn(runtime, agent, "first")
        await _turn(runtime, agent, "second")  # at once: no hint
        assert not [e for e in agent.session.events if isinstance(e.data, CacheIdle)]
        await asyncio.sleep(2.1)  # longer than the provider keeps it (a lower bound only)
        await _turn(runtime, agent, "third")
        (idle,) = [e.data for e in agent.session.events if isinstance(e.data, CacheIdle)]
        assert idle.idle_s >= 2
        assert idle.turn == 3
        text = idle.notice()
        assert text.startswith(f"{idle.idle_s // 60 or 1} min since the last request")
        assert "may have dropped its cached copy" in text
    finally:
        await runtime.aclose()


async def _started(home: Path, cwd: Path, fake_llm: FakeLLM, *, echo: bool) -> Runtime:
    runtime = await start_runtime(
        home=home,
        cwd=cwd,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"generate": False},
        },
    )
    if echo:
        await runtime.plugins.load([Candidate("echo", "tests", echo_plugin)])
    return runtime


async def test_a_resumed_session_compares_its_first_request_with_the_logged_one(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: object
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")  # type: ignore[attr-defined]
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))  # type: ignore[attr-defined]
    fake_llm.add(*(Reply(text=f"answer {n}") for n in range(3)))
    first = await _started(home, tmp_path, fake_llm, echo=True)
    try:
        agent = await first.agents.create(tmp_path)
        await _turn(first, agent, "first")
        session_id = str(agent.id)
    finally:
        await first.aclose()

    # Resumed as it was: the prompt's head is the logged one, nothing to say.
    same = await _started(home, tmp_path, fake_llm, echo=True)
    try:
        agent = await same.agents.resume(session_id, cwd=tmp_path)
        await _turn(same, agent, "second")
        assert not [e for e in agent.session.events if isinstance(e.data, PrefixChanged)]
    finally:
        await same.aclose()

    # Resumed without a plugin whose tool the earlier requests listed: said at once.
    fewer = await _started(home, tmp_path, fake_llm, echo=False)
    try:
        agent = await fewer.agents.resume(session_id, cwd=tmp_path)
        await _turn(fewer, agent, "third")
        (changed,) = [e.data for e in agent.session.events if isinstance(e.data, PrefixChanged)]
        assert [(c.part, c.detail) for c in changed.changes] == [("tools", "-echo, -shout")]
        assert changed.turn == 3
    finally:
        await fewer.aclose()
