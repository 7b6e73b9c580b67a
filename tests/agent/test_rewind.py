"""Rewinding the conversation through the real loop against the scripted server: after
``Agent.rewind`` to turn 1 and the prompt sent again, the server receives only what
the first request held: after a ``/compact`` too, and in a new process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent, RewindError
from dsh.llm import user_text
from dsh.runtime import Runtime
from dsh.session import check_log, turns
from dsh.testing import FakeLLM, Reply
from dsh_plugins.todo import TodoItem, TodoWrite
from tests.plugins.compaction.support import (
    check_reconstructable,
    command,
    echo,
    is_compaction,
    start,
    turn,
)
from tests.support.waits import HANG_S

FIRST = "echo the first report"
SECOND = "and check the second report"


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started = await start(tmp_path, fake_llm, compaction={"auto": False})
    yield started
    await started.aclose()


async def two_turns(runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path) -> Agent:
    fake_llm.add(
        Reply(tool_calls=[echo("first report: alpha")]),
        Reply(text="Echoed the first report."),
        Reply(text="The second report is fine too."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, FIRST)
    await turn(agent, SECOND)
    return agent


def conversation(fake_llm: FakeLLM) -> list[dict[str, Any]]:
    return [r.body for r in fake_llm.chat_requests if not is_compaction(r.body)]


async def rewind_and_send_again(agent: Agent, fake_llm: FakeLLM) -> None:
    prompt = agent.rewind(1)
    assert prompt.text() == FIRST
    fake_llm.add(Reply(text="Again."))
    agent.followup(prompt)
    await asyncio.wait_for(agent.when_idle(), HANG_S)


async def test_after_a_rewind_to_turn_1_the_next_request_holds_only_the_first_prompt(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    await rewind_and_send_again(agent, fake_llm)

    sent = conversation(fake_llm)
    # What the first request held (the context entries entered again, the prompt), and
    # nothing of either rewound turn.
    assert sent[-1]["messages"] == sent[0]["messages"]
    assert [(t.turn, t.shadowed) for t in turns(agent.session)] == [
        (1, True),
        (2, True),
        (3, False),
    ]
    assert check_log(agent.session.events) == []
    check_reconstructable(agent.session.events, [r.body for r in fake_llm.chat_requests])


async def test_after_a_compact_a_turn_it_summarised_can_be_rewound(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    # A todo list written in turn 2, which the rewind takes back with it.
    agent.session.append("todo/write", TodoWrite(todos=(TodoItem(content="x", status="pending"),)))
    fake_llm.add(Reply(text="The user had the first report echoed back."))
    await command(runtime, agent, "/compact")
    assert any(is_compaction(r.body) for r in fake_llm.chat_requests)

    await rewind_and_send_again(agent, fake_llm)

    sent = conversation(fake_llm)
    assert sent[-1]["messages"] == sent[0]["messages"]
    check_reconstructable(agent.session.events, [r.body for r in fake_llm.chat_requests])

    # And compacting again summarises the conversation as it now is, without the todo
    # list of the rewound turn.
    fake_llm.add(Reply(text="The report was echoed again."))
    await turn(agent, "one more")
    fake_llm.add(Reply(text="Summary, again."))
    await command(runtime, agent, "/compact")
    [*_, summary_request] = [r.body for r in fake_llm.chat_requests if is_compaction(r.body)]
    said = str(summary_request["messages"])
    assert SECOND not in said
    assert "todo list" not in said.lower()


async def test_a_resumed_session_rewinds_the_same_in_a_new_process(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    session_id = str(agent.id)
    await runtime.aclose()

    # A new runtime on the same storage: only the log carries over.
    again = await start(tmp_path, fake_llm, compaction={"auto": False})
    try:
        resumed = await again.agents.resume(session_id, cwd=tmp_path / "project")
        await rewind_and_send_again(resumed, fake_llm)
        sent = conversation(fake_llm)
        assert sent[-1]["messages"] == sent[0]["messages"]
        check_reconstructable(resumed.session.events, [r.body for r in fake_llm.chat_requests])
    finally:
        await again.aclose()


async def test_a_rewind_is_refused_while_a_turn_runs_or_for_a_turn_not_there(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    length = len(agent.session.events)
    with pytest.raises(RewindError, match="there is no turn 7; the turns are 1-2"):
        agent.rewind(7)
    fake_llm.add(Reply(text="slowly", chunk_size=1, chunk_delay_ms=50))
    agent.followup(user_text("take your time"))
    with pytest.raises(RewindError, match="a turn is running"):
        agent.rewind(1)
    await asyncio.wait_for(agent.when_idle(), HANG_S)
    agent.rewind(2)
    with pytest.raises(RewindError, match="turn 3 was rewound already"):
        agent.rewind(3)
    assert [e.type for e in agent.session.events[length:]].count("history/rewound") == 1
