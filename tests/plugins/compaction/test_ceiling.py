"""The model's ceiling: a window that counts the prompt and the answer's cap together
(DeepSeek refuses a request whose prompt plus ``max_tokens`` passes 1,048,576). A real
runtime against the scripted server, with a 20,000-token window and a 6,000-token
output cap, so a short scripted session comes near it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.runtime import Runtime
from dsh.session import SessionEvent, TurnEnd, check_log
from dsh.testing import FakeLLM, Reply
from dsh.ui.entries import NoticeEntry, TranscriptFold
from dsh_plugins.compaction.events import CeilingFit, CompactionStart, CompactionSummary
from tests.plugins.compaction.support import (
    WINDOW,
    check_reconstructable,
    command,
    dump,
    is_compaction,
    turn,
)
from tests.plugins.compaction.support import start as start_runtime

CAP = 6_000


@pytest.fixture
async def started(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[Runtime]]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    runtimes: list[Runtime] = []
    yield runtimes
    for runtime in runtimes:
        await runtime.aclose()


def assert_every_request_fits(server: FakeLLM) -> None:
    """The property: no request asks for more than the window holds. The scripted
    server's usage report (a quarter of the request's characters, which the runtime
    calibrates by) stands for the provider's count."""
    for record in server.chat_requests:
        prompt = max(1, len(record.raw.decode("utf-8", "replace")) // 4)
        assert prompt + record.body["max_tokens"] <= WINDOW, (prompt, record.body["max_tokens"])


def notices(events: list[SessionEvent]) -> list[str]:
    fold = TranscriptFold()
    for event in events:
        fold.apply(event)
    return [entry.text for entry in fold.entries if isinstance(entry, NoticeEntry)]


async def test_a_cap_that_would_pass_the_ceiling_is_lowered_and_said(
    started: list[Runtime], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime = await start_runtime(tmp_path, fake_llm, output_cap=CAP)
    started.append(runtime)
    fake_llm.add(
        Reply(tool_calls=[dump(40_000, "log")]),  # about 13,000 tokens come back
        Reply(text="The log is long."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the log")

    events = list(agent.session.events)
    [*_, end] = [e.data for e in events if isinstance(e.data, TurnEnd)]
    assert end.reason.kind == "completed"
    first, second = (r.body for r in fake_llm.chat_requests)
    assert first["max_tokens"] == CAP  # room to spare: the model's own cap
    fits = [e.data for e in events if isinstance(e.data, CeilingFit)]
    [fit] = fits
    assert fit.max_tokens == CAP
    assert fit.lowered_to is not None
    assert 2_000 <= fit.lowered_to < CAP
    assert second["max_tokens"] == fit.lowered_to
    assert fit.context_tokens + fit.lowered_to < WINDOW
    assert not any(isinstance(e.data, CompactionStart) for e in events)  # not needed
    assert_every_request_fits(fake_llm)
    [said] = [text for text in notices(events) if "at most" in text]
    assert f"at most {fit.lowered_to:,} tokens (not 6,000)" in said
    assert "fit within the model's 20,000-token limit" in said
    assert check_log(events) == []
    check_reconstructable(events, [r.body for r in fake_llm.chat_requests])


async def test_no_room_for_an_answer_compacts_first_and_says_so(
    started: list[Runtime], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # The threshold is the whole window, so only the ceiling can start a compaction.
    runtime = await start_runtime(tmp_path, fake_llm, output_cap=CAP, compaction={"threshold": 1.0})
    started.append(runtime)
    fake_llm.add(
        Reply(tool_calls=[dump(40_000, "early")]),  # about 10,000 tokens
        Reply(text="Dumped the early log."),
        Reply(tool_calls=[dump(28_000, "late")]),  # 7,000 more: no room for 2,000
        Reply(text="The early log was dumped; nothing is pending from it."),  # the summary
        Reply(text="Dumped the late log."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the early log")
    await turn(agent, "dump the late log")

    events = list(agent.session.events)
    [*_, end] = [e.data for e in events if isinstance(e.data, TurnEnd)]
    assert end.reason.kind == "completed"
    bodies = [r.body for r in fake_llm.chat_requests]
    assert [is_compaction(b) for b in bodies] == [False, False, False, True, False]
    [short] = [e for e in events if isinstance(e.data, CeilingFit) and e.data.lowered_to is None]
    [compacting] = [e for e in events if isinstance(e.data, CompactionStart)]
    [summary] = [e.data for e in events if isinstance(e.data, CompactionSummary)]
    assert short.seq < compacting.seq  # said, then done
    assert short.data.context_tokens + 2_000 > WINDOW * 0.98
    assert summary.context_tokens is not None
    assert summary.context_tokens < short.data.context_tokens
    assert_every_request_fits(fake_llm)
    said = notices(events)
    assert any("leaves too little room for an answer" in text for text in said), said
    assert any("Compacted" in text for text in said), said
    assert check_log(events) == []


async def test_a_lowered_cap_is_said_once_a_turn(
    started: list[Runtime], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Every request of a turn near the ceiling is lowered, and the turn says so once:
    a small window would otherwise put a notice before each step."""
    runtime = await start_runtime(tmp_path, fake_llm, output_cap=CAP)
    started.append(runtime)
    fake_llm.add(
        Reply(tool_calls=[dump(40_000, "log")]),
        Reply(tool_calls=[dump(400, "a")]),
        Reply(tool_calls=[dump(400, "b")]),
        Reply(text="Done."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the logs")

    events = list(agent.session.events)
    lowered = [r.body["max_tokens"] for r in fake_llm.chat_requests][1:]
    assert all(cap < CAP for cap in lowered)  # each request after the dump is lowered
    assert len([e for e in events if isinstance(e.data, CeilingFit)]) == 1
    assert len([text for text in notices(events) if "at most" in text]) == 1
    assert_every_request_fits(fake_llm)


async def test_a_lowered_cap_does_not_outlive_the_room_it_was_lowered_for(
    started: list[Runtime], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """The cap lowered near the ceiling is that moment's answer, not a choice: once a
    compaction gives room back, the next request asks the model's own cap again, in
    this process and in a later one that resumes the session."""
    runtime = await start_runtime(tmp_path, fake_llm, output_cap=CAP)
    started.append(runtime)
    fake_llm.add(
        Reply(tool_calls=[dump(40_000, "log")]),
        Reply(text="The log is long."),
        Reply(text="A log was dumped; nothing is pending."),  # the /compact summary
        Reply(text="Still here."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the log")
    await command(runtime, agent, "/compact")
    await turn(agent, "and now?")

    caps = [r.body["max_tokens"] for r in fake_llm.chat_requests if not is_compaction(r.body)]
    assert caps[0] == CAP
    assert caps[1] < CAP  # lowered near the ceiling
    assert caps[2] == CAP  # room again after the compaction
    session_id = agent.session.id
    await runtime.agents.dispose(agent)
    await runtime.aclose()
    started.remove(runtime)

    # The log's last request had room; one lowered is the last before a resume too.
    later = await start_runtime(tmp_path, fake_llm, output_cap=CAP)
    started.append(later)
    fake_llm.add(Reply(tool_calls=[dump(40_000, "more")]), Reply(text="Long again."))
    resumed = await later.agents.resume(str(session_id))
    await turn(resumed, "dump more")
    await resumed.when_idle()
    await later.agents.dispose(resumed)
    await later.aclose()
    started.remove(later)

    again = await start_runtime(tmp_path, fake_llm, output_cap=CAP)
    started.append(again)
    fake_llm.add(
        Reply(text="A log was dumped twice; nothing is pending."),  # the /compact summary
        Reply(text="Fine."),
    )
    resumed = await again.agents.resume(str(session_id))
    await command(again, resumed, "/compact")
    await turn(resumed, "fine?")
    last = [r.body for r in fake_llm.chat_requests if not is_compaction(r.body)][-1]
    assert last["max_tokens"] == CAP
