"""Automatic compaction in a real runtime against the scripted server: before a step's
request when the context passes the threshold of the model's own window, and after a
request the provider refused as too long."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from dsh.llm import PluginSource
from dsh.runtime import Runtime
from dsh.session import (
    TurnEnd,
    check_log,
)
from dsh.testing import FakeLLM, Fault, Reply
from dsh_plugins.compaction.events import CompactionEnd, CompactionStart, CompactionSummary
from tests.plugins.compaction.dump_tool import dump_text
from tests.plugins.compaction.support import (
    all_text,
    check_reconstructable,
    dump,
    echo,
    is_compaction,
    of_type,
    service,
    start,
    turn,
)

SUMMARY = "Early on, the first report was echoed back in full; nothing is pending from it."
BIG1 = "alpha " * 2_700  # ~4,000 tokens, sent as arguments and echoed back
BIG2 = "omega " * 2_700

Starter = Callable[..., Coroutine[Any, Any, Runtime]]


@pytest.fixture
async def runtime_with(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Starter]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started: list[Runtime] = []

    async def make(**options: Any) -> Runtime:
        runtime = await start(tmp_path, fake_llm, **options)
        started.append(runtime)
        return runtime

    yield make
    for runtime in started:
        await runtime.aclose()


def bodies(server: FakeLLM) -> list[dict[str, Any]]:
    return [r.body for r in server.chat_requests]


def script_two_echo_turns(server: FakeLLM, *, summary: Reply | None) -> None:
    server.add(
        Reply(tool_calls=[echo(BIG1)]),
        Reply(text="Echoed the first report."),
        Reply(tool_calls=[echo(BIG2)]),  # the context passes 17,000 tokens here
    )
    if summary is not None:
        server.add(summary)
    server.add(Reply(text="Echoed the second report."))


async def test_pressure_compacts_before_the_request_that_would_overfill(
    runtime_with: Starter, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime = await runtime_with()
    script_two_echo_turns(fake_llm, summary=Reply(text=SUMMARY))
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "echo the first report")
    await turn(agent, "now echo the second report")

    events = agent.session.events
    [started] = [e.data for e in events if isinstance(e.data, CompactionStart)]
    [ended] = [e.data for e in events if isinstance(e.data, CompactionEnd)]
    [summary] = [e.data for e in events if isinstance(e.data, CompactionSummary)]
    assert started.turn == ended.turn == 2  # inside the second turn, before its 2nd step
    assert ended.error is None
    [*_, end] = [e.data for e in events if isinstance(e.data, TurnEnd)]
    assert end.reason.kind == "completed"

    requests = bodies(fake_llm)
    assert [is_compaction(b) for b in requests] == [False, False, False, True, False]
    # The summariser got the first turn; the second turn's call stayed verbatim.
    assert BIG1 in all_text(requests[3])
    assert BIG2 not in all_text(requests[3])
    # The request after compaction: the summary, not the old messages; the second
    # report's call and its result verbatim; the context entries entered again.
    after = requests[4]
    assert SUMMARY in all_text(after)
    assert BIG1 not in all_text(after)
    assert "echo the first report" not in all_text(after)
    assert BIG2 in all_text(after)
    assert "Today's date" in all_text(after)
    assert summary.context_tokens is not None
    assert summary.context_tokens < 17_000 < summary.shadowed_token_count + summary.context_tokens
    assert check_log(events) == []
    check_reconstructable(events, requests)


async def test_the_threshold_is_a_share_of_the_models_own_window(
    runtime_with: Starter, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # The same conversation with a window ten times larger: nowhere near 85 %.
    runtime = await runtime_with(window=200_000)
    script_two_echo_turns(fake_llm, summary=None)
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "echo the first report")
    await turn(agent, "now echo the second report")
    assert not of_type(agent.session.events, "compaction/start")
    assert not any(is_compaction(b) for b in bodies(fake_llm))
    assert service(runtime).pressure(agent) > 17_000  # what compacted in a 20,000 window


async def test_a_lower_threshold_setting_compacts_sooner(
    runtime_with: Starter, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # 6 % of 200,000 is 12,000 tokens: passed after the first turn already.
    runtime = await runtime_with(window=200_000, compaction={"threshold": 0.06, "keep": 0.02})
    fake_llm.add(
        Reply(tool_calls=[echo(BIG1)]),
        Reply(text="Echoed the first report."),
        Reply(text=SUMMARY),
        Reply(text="Nothing to echo."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "echo the first report")
    await turn(agent, "anything else?")
    [started] = [e.data for e in agent.session.events if isinstance(e.data, CompactionStart)]
    assert started.turn == 2  # before the second turn's first request
    requests = bodies(fake_llm)
    assert is_compaction(requests[2])
    assert BIG1 not in all_text(requests[3])
    assert "anything else?" in all_text(requests[3])
    check_reconstructable(agent.session.events, requests)


async def test_a_failed_automatic_compaction_lets_the_turn_go_on_unchanged(
    runtime_with: Starter, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime = await runtime_with()
    script_two_echo_turns(fake_llm, summary=Reply(fault=Fault(status=500)))
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "echo the first report")
    await turn(agent, "now echo the second report")

    events = agent.session.events
    [ended] = [e.data for e in events if isinstance(e.data, CompactionEnd)]
    assert ended.error is not None
    assert "server error" in ended.error
    assert not of_type(events, "compaction/summary")
    [*_, end] = [e.data for e in events if isinstance(e.data, TurnEnd)]
    assert end.reason.kind == "completed"
    after = bodies(fake_llm)[-1]
    assert not is_compaction(after)
    assert BIG1 in all_text(after)  # the whole history, as before
    assert check_log(events) == []
    check_reconstructable(events, bodies(fake_llm))


async def test_a_request_refused_as_too_long_is_compacted_and_sent_again(
    runtime_with: Starter, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # Automatic compaction off: the provider's refusal is what triggers it. The
    # history is bigger than the summariser may be sent, so its output is cut short.
    runtime = await runtime_with(compaction={"auto": False})
    too_long = Fault(
        status=400,
        body={"error": {"message": "This model's maximum context length is 20000 tokens."}},
    )
    fake_llm.add(
        Reply(tool_calls=[dump(60_000, "log")]),
        Reply(text="Dumped the log."),
        Reply(fault=too_long),
        Reply(text=SUMMARY),
        Reply(text="Here is the answer."),
    )
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "dump the log")
    await turn(agent, "what did it say?")

    events = agent.session.events
    [*_, end_two] = [e.data for e in events if isinstance(e.data, TurnEnd)]
    assert end_two.reason.kind == "completed"
    [summary] = [e.data for e in events if isinstance(e.data, CompactionSummary)]
    [result] = [e for e in events if e.type == "tool/result"]
    assert summary.trimmed_seqs == (result.seq,)
    requests = bodies(fake_llm)
    assert is_compaction(requests[3])
    assert dump_text(60_000, "log")[:5_000] not in all_text(requests[3])
    retried = requests[4]
    assert SUMMARY in all_text(retried)
    assert "what did it say?" in all_text(retried)
    assert "log 000000" not in all_text(retried)
    assert len(all_text(retried)) < len(all_text(requests[2])) // 5
    assert check_log(events) == []
    check_reconstructable(events, requests)


async def test_the_summary_message_is_a_compact_context_entry(
    runtime_with: Starter, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime = await runtime_with()
    script_two_echo_turns(fake_llm, summary=Reply(text=SUMMARY))
    agent = await runtime.agents.create(tmp_path / "project")
    await turn(agent, "echo the first report")
    await turn(agent, "now echo the second report")
    first = agent.session.derive_messages()[0]
    assert isinstance(first.source, PluginSource)
    assert first.source.plugin == "compact"
    assert first.source.form == "summary"
    [summary] = of_type(agent.session.events, "compaction/summary")
    assert first.source.model_extra == {"compactionId": summary.data.compaction_id}
