"""``/compact`` through the commands service, in a real runtime against the scripted
server: what is logged, what the next request holds, the todo list carried over,
failures that change nothing, and tool output cut short when the history is too big
for the summary request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent
from dsh.llm import PluginSource, UserMessage
from dsh.runtime import Runtime
from dsh.session import (
    AssistantMessageData,
    ReplaceOp,
    check_log,
    paid_call,
)
from dsh.session.payloads import CommandDone, CommandRun
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec
from dsh.ui.entries import TranscriptFold
from dsh_plugins.compaction.events import CompactionEnd, CompactionStart, CompactionSummary
from tests.plugins.compaction.dump_tool import dump_text
from tests.plugins.compaction.support import (
    WINDOW,
    all_text,
    check_reconstructable,
    command,
    dump,
    echo,
    is_compaction,
    of_type,
    turn,
)

SUMMARY = "The user had the first report echoed back; it came back intact."
FIRST = "echo the first report"
SECOND = "and check the second report"


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


def bodies(server: FakeLLM) -> list[dict[str, object]]:
    return [r.body for r in server.chat_requests]


async def test_compact_replaces_the_older_turns_with_a_summary(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    conversation = fake_llm.chat_requests[-1].body
    fake_llm.add(Reply(text=SUMMARY))

    host = await command(runtime, agent, "/compact")

    assert host.shown[0][0] == "info"
    assert host.text.startswith("Compacted ")
    assert "tokens now" in host.text
    events = agent.session.events
    [run] = [e.data for e in events if isinstance(e.data, CommandRun)]
    [done] = [e.data for e in events if isinstance(e.data, CommandDone)]
    assert (run.name, done.kind) == ("compact", "success")
    [started] = [e for e in events if isinstance(e.data, CompactionStart)]
    [summary] = [e for e in events if isinstance(e.data, CompactionSummary)]
    [ended] = [e for e in events if isinstance(e.data, CompactionEnd)]
    assert started.data.turn is None  # between turns
    assert ended.data.error is None
    assert summary.data.summary == SUMMARY
    assert (summary.data.provider, summary.data.model) == ("deepseek", "deepseek-flash")
    assert summary.data.usage is not None
    assert started.seq < summary.seq < ended.seq

    # The summary message replaced exactly the first turn's nodes, citing them all.
    placed = next(e for e in events if isinstance(e.surface_op, ReplaceOp))
    assert summary.seq < placed.seq < ended.seq
    shadowed = summary.data.shadowed_seqs
    assert placed.source_event_seqs == shadowed
    assert placed.surface_op == ReplaceOp(start=shadowed[0], end=shadowed[-1])
    first_turn = {e.seq for e in events if e.seq in shadowed}
    assert any(
        isinstance(events[s].data, UserMessage) and events[s].data.text() == FIRST
        for s in first_turn
    )
    message = placed.data
    assert isinstance(message.source, PluginSource)
    assert message.source.plugin == "compact"
    assert message.text().startswith("<compacted-summary>")
    assert message.text().endswith("</compacted-summary>")
    assert SUMMARY in message.text()

    # History now: the summary, then the second turn verbatim.
    history = agent.session.derive_messages()
    assert history[0] is message or history[0] == message
    texts = [m.text() for m in history]
    assert SECOND in texts
    assert FIRST not in texts
    assert agent.session.surface_nodes[0] == placed.seq

    # The summary request replayed the conversation's system prompt and tools and the
    # first turn, and asked for the summary; the second turn was not part of it.
    request = fake_llm.chat_requests[-1].body
    assert is_compaction(request)
    assert request["messages"][0] == conversation["messages"][0]  # the system prompt
    assert request["tools"] == conversation["tools"]
    assert "first report: alpha" in all_text(request)
    assert SECOND not in all_text(request)

    # The next request carries the summary instead of the first turn, and the
    # context entries folded into it are entered again.
    fake_llm.add(Reply(text="Nothing is left to do."))
    await turn(agent, "what is left?")
    after = fake_llm.chat_requests[-1].body
    assert SUMMARY in all_text(after)
    assert "first report: alpha" not in all_text(after)
    assert FIRST not in all_text(after)
    assert SECOND in all_text(after)
    assert "Today's date" in all_text(after)
    assert check_log(agent.session.events) == []
    check_reconstructable(agent.session.events, bodies(fake_llm))


async def test_the_summary_call_counts_in_cost_the_status_and_the_index(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    fake_llm.add(Reply(text=SUMMARY))
    await command(runtime, agent, "/compact")
    events = agent.session.events
    paid = [e for e in events if paid_call(e) is not None]
    # Three answers, then the summary.
    assert [type(e.data) for e in paid][-2:] == [AssistantMessageData, CompactionSummary]
    assert len(paid) == 4
    calls = [call for e in paid if (call := paid_call(e)) is not None]
    prices = [runtime.llm.cost(c.provider, c.model, c.usage, c.at) for c in calls]
    assert all(price is not None and price > 0 for price in prices)
    expected = sum(price for price in prices if price is not None)

    shown = (await command(runtime, agent, "/cost")).text
    assert shown.startswith("4 model calls:")
    assert f"${expected:.4f}" in shown

    fold = TranscriptFold(cost=runtime.llm.cost)
    for event in events:
        fold.apply(event)
    assert fold.status.cost == pytest.approx(expected)

    await runtime.sessions.flush(agent.session)
    await runtime.sessions.indexed()
    catalog = runtime.sessions.catalog
    assert catalog is not None
    [entry] = [e for e in await catalog.list() if e.id == agent.id]
    assert entry.cost == pytest.approx(expected)


async def test_a_focus_is_passed_to_the_summariser_and_logged(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    fake_llm.add(Reply(text=SUMMARY))
    await command(runtime, agent, "/compact the alpha report's wording")
    [started] = [e.data for e in agent.session.events if isinstance(e.data, CompactionStart)]
    assert started.focus == "the alpha report's wording"
    ask = fake_llm.chat_requests[-1].body["messages"][-1]["content"]
    assert "pay particular attention to: the alpha report's wording" in ask
    check_reconstructable(agent.session.events, bodies(fake_llm))


async def test_nothing_to_compact_makes_no_call_and_logs_nothing(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await runtime.agents.create(tmp_path / "project")
    host = await command(runtime, agent, "/compact")
    assert "Nothing to compact" in host.text

    fake_llm.add(Reply(text="Hello."))
    await turn(agent, "hi")
    host = await command(runtime, agent, "/compact")  # one exchange: nothing to summarise
    assert "Nothing to compact" in host.text
    assert len(fake_llm.chat_requests) == 1
    assert not of_type(agent.session.events, "compaction/start")


async def test_compacting_twice_folds_the_first_summary_into_the_second(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    fake_llm.add(Reply(text=SUMMARY))
    await command(runtime, agent, "/compact")
    again = await command(runtime, agent, "/compact")  # only the summary before the tail
    assert "Nothing to compact" in again.text

    fake_llm.add(Reply(text="Third answer."), Reply(text="Both summaries in one."))
    await turn(agent, "a third question")
    await command(runtime, agent, "/compact")
    request = fake_llm.chat_requests[-1].body
    assert is_compaction(request)
    assert SUMMARY in all_text(request)  # the earlier summary is summarised again
    history = agent.session.derive_messages()
    assert "Both summaries in one." in history[0].text()
    # The third turn stays, with the context entered again at its start.
    assert [m.text() for m in history[2:]] == ["a third question", "Third answer."]
    assert history[1].text().startswith("Today's date")
    assert len(of_type(agent.session.events, "compaction/summary")) == 2
    assert check_log(agent.session.events) == []
    check_reconstructable(agent.session.events, bodies(fake_llm))


async def test_the_todo_list_survives_compaction(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    todos = [
        {"content": "Read the parser", "status": "completed"},
        {"content": "Fix quoted fields", "status": "in_progress"},
        {"content": "Add a regression test", "status": "pending"},
    ]
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="todo_write", arguments={"todos": todos})]),
        Reply(text="Planned; working on the quoted fields."),
        Reply(text="Still on it."),
        Reply(text=SUMMARY),
        Reply(text="Next: the regression test."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "fix the CSV parser, with a plan")
    await turn(agent, "how is it going?")
    await command(runtime, agent, "/compact")

    # The todo_write call is gone from history, the list is not.
    history = agent.session.derive_messages()
    assert not any(
        getattr(block, "name", None) == "todo_write" for m in history for block in m.content
    )
    summary = history[0].text()
    assert "- [completed] Read the parser" in summary
    assert "- [in_progress] Fix quoted fields" in summary
    assert "- [pending] Add a regression test" in summary
    ask = fake_llm.chat_requests[-1].body["messages"][-1]["content"]
    assert "- [in_progress] Fix quoted fields" in ask  # the summariser knew it too

    await turn(agent, "what next?")
    after = all_text(fake_llm.chat_requests[-1].body)
    assert "- [in_progress] Fix quoted fields" in after
    assert "- [pending] Add a regression test" in after
    check_reconstructable(agent.session.events, bodies(fake_llm))


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(fault=Fault(status=500)), "server error"),
        (Reply(text="The user wanted a long summary that never", cut_after=6), ""),
        (Reply(text="A summary", malformed_at=3), ""),
        (Reply(text="   "), "the model wrote no summary"),
    ],
    ids=["http-error", "cut-stream", "malformed-stream", "empty"],
)
async def test_a_failed_compaction_leaves_history_unchanged_and_says_why(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path, reply: Reply, why: str
) -> None:
    agent = await two_turns(runtime, fake_llm, tmp_path)
    before = agent.session.derive_messages()
    nodes = agent.session.surface_nodes
    fake_llm.add(reply)

    await command(runtime, agent, "/compact")

    text = failure(agent)  # a recorded command's failure is in its command/done
    assert text.startswith("compaction failed: ")
    assert why in text
    events = agent.session.events
    [ended] = [e.data for e in events if isinstance(e.data, CompactionEnd)]
    assert ended.error
    assert text == f"compaction failed: {ended.error}"
    assert not of_type(events, "compaction/summary")
    assert not any(isinstance(e.surface_op, ReplaceOp) for e in events)
    [done] = [e.data for e in events if isinstance(e.data, CommandDone)]
    assert done.kind == "error"
    assert agent.session.surface_nodes == nodes
    assert agent.session.derive_messages() == before
    assert agent.status == "idle"

    # The conversation goes on over the whole history.
    fake_llm.add(Reply(text="Still here."))
    await turn(agent, "still there?")
    assert FIRST in all_text(fake_llm.chat_requests[-1].body)
    assert check_log(agent.session.events) == []


async def test_compact_is_refused_while_a_turn_runs(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Slow answer.", first_byte_delay_ms=500))
    agent = await runtime.agents.create(tmp_path / "project")
    from dsh.llm import user_text

    agent.followup(user_text("take your time"))
    await command(runtime, agent, "/compact")
    assert "a turn is running" in failure(agent)
    await asyncio.wait_for(agent.when_idle(), 10)
    assert not of_type(agent.session.events, "compaction/start")


async def test_an_oversized_history_has_its_oldest_tool_output_cut_for_the_summariser(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # ~11,000 tokens of early output and ~4,000 of late output on top of the ~4,500 of
    # system prompt and tools: more than the summary request may hold in a 20,000 window.
    early, late = dump_text(44_000, "early"), dump_text(16_000, "late")
    fake_llm.add(
        Reply(tool_calls=[dump(44_000, "early")]),
        Reply(text="Dumped the early log."),
        Reply(tool_calls=[dump(16_000, "late")]),
        Reply(text="Dumped the late log."),
        Reply(text=SUMMARY),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the early log")
    await turn(agent, "dump the late log")

    await command(runtime, agent, "/compact")

    [summary] = [e.data for e in agent.session.events if isinstance(e.data, CompactionSummary)]
    results = [e for e in agent.session.events if e.type == "tool/result"]
    assert summary.trimmed_seqs == (results[0].seq,)  # the oldest output only
    assert summary.omitted_seqs == ()
    assert results[1].seq in summary.shadowed_seqs  # summarised, in full
    request = fake_llm.chat_requests[-1].body
    assert is_compaction(request)
    tool_texts = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    assert tool_texts[0].startswith(early[:400])
    assert "characters were left out]" in tool_texts[0]
    assert early[:2000] not in tool_texts[0]
    assert tool_texts[1] == f"{late}"
    # The request fits the window, with room for the answer.
    assert len(json.dumps(request, ensure_ascii=False)) / 4 < WINDOW
    assert SUMMARY in agent.session.derive_messages()[0].text()
    check_reconstructable(agent.session.events, bodies(fake_llm))


def failure(agent: Any) -> str:
    """What the last slash command's ``command/done`` says went wrong."""
    from dsh.session.payloads import CommandDone

    [done] = [e.data for e in agent.session.events if isinstance(e.data, CommandDone)][-1:]
    assert done.kind == "error", done
    return str(done.text)
