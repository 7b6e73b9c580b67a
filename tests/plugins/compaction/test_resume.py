"""A compacted session resumed: its context use is known at once, from the log alone,
and is close to what the next request really holds."""

from __future__ import annotations

from pathlib import Path

from dsh.runtime import Runtime
from dsh.session import AssistantMessageData
from dsh.testing import FakeLLM, Reply
from dsh.ui.entries import TranscriptFold
from dsh_plugins.compaction.events import CompactionSummary
from tests.plugins.compaction.support import command, dump, service, turn

SUMMARY = "Two logs were dumped; the user then asked what is left."


async def compacted_session(runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path) -> str:
    fake_llm.add(
        Reply(tool_calls=[dump(40_000, "early")]),
        Reply(text="Dumped the early log."),
        Reply(tool_calls=[dump(8_000, "late")]),
        Reply(text="Dumped the late log."),
        Reply(text=SUMMARY),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the early log")
    await turn(agent, "dump the late log")
    await command(runtime, agent, "/compact")
    await runtime.agents.dispose(agent)
    return str(agent.id)


def within(value: int, real: int, tolerance: float = 0.2) -> bool:
    return abs(value - real) <= tolerance * real


async def test_a_resumed_compacted_session_knows_its_context_use(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    session_id = await compacted_session(runtime, fake_llm, tmp_path)
    before = fake_llm.chat_requests[3].body  # the last conversation request
    agent = await runtime.agents.resume(session_id)
    [summary] = [e.data for e in agent.session.events if isinstance(e.data, CompactionSummary)]
    logged = summary.context_tokens
    assert logged is not None
    measured = service(runtime).pressure(agent)

    fake_llm.add(Reply(text="Nothing is left."))
    await turn(agent, "what is left?")
    [*_, last] = [
        e.data
        for e in agent.session.events
        if isinstance(e.data, AssistantMessageData) and e.data.usage is not None
    ]
    assert last.usage is not None
    real = last.usage.billed_input_tokens
    assert real < len(str(before)) // 4 // 2  # compaction did halve the context, at least
    assert within(logged, real), (logged, real)
    assert within(measured, real), (measured, real)


async def test_the_status_fold_shows_the_compacted_context_on_resume(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    session_id = await compacted_session(runtime, fake_llm, tmp_path)
    agent = await runtime.agents.resume(session_id)
    fold = TranscriptFold()
    for event in agent.session.events:
        fold.apply(event)
    [summary] = [e.data for e in agent.session.events if isinstance(e.data, CompactionSummary)]
    assert fold.status.context_tokens == summary.context_tokens
    assert fold.status.context_window == 20_000
