"""Compaction end to end: ``dsh -p`` as a real child process against the scripted
server, the stored log checked afterwards (sound, and every request the server got
rebuildable from it: the conversation's by the core's helper, the summary requests by
the plugin's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh.session import SessionEvent, check_log
from dsh.testing import FakeLLM, Reply
from dsh_plugins.compaction.events import CompactionEnd, CompactionStart, CompactionSummary
from tests.e2e.harness import Dsh, of_type
from tests.plugins.compaction.support import (
    MODULES,
    WINDOW,
    all_text,
    check_reconstructable,
    echo,
    is_compaction,
)

SETTINGS = f"""\
[plugins]
modules = {MODULES!r}

[plugins.llm-deepseek.retry]
max_retries = 0

[plugins.llm-deepseek.models.deepseek-flash]
context_window = {WINDOW}
""".replace("'", '"')

SUMMARY = "The user had the first report echoed back in full; nothing of it is pending."
BIG1 = "alpha " * 2_700  # ~4,000 tokens, sent as arguments and echoed back
BIG2 = "omega " * 2_700


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    (dsh.home / "settings.toml").write_text(SETTINGS)
    return dsh


def bodies(server: FakeLLM) -> list[dict[str, Any]]:
    return [r.body for r in server.chat_requests]


async def checked(dsh: Dsh, server: FakeLLM, session_id: str) -> list[SessionEvent]:
    events = await dsh.events(session_id)
    assert check_log(events) == []
    check_reconstructable(events, bodies(server))
    return events


async def test_compact_headless_on_a_resumed_session(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[echo("first report: alpha")]),
        Reply(text="Echoed the first report."),
        Reply(text="The second report is fine."),
    )
    first = await dsh.run("-p", "echo the first report")
    assert first.code == 0, first.stderr
    [session_id] = await dsh.session_ids()
    second = await dsh.run("-p", "check the second report", "--resume", session_id)
    assert second.code == 0, second.stderr

    fake_llm.add(Reply(text=SUMMARY))
    done = await dsh.run("-p", "/compact", "--resume", session_id, "--output-format", "json")
    assert done.code == 0, done.stderr
    # What /compact says is on stderr; stdout holds only the JSON record.
    assert "Compacted " in done.stderr
    assert "tokens now" in done.stderr
    [line] = done.stdout.splitlines()
    result = json.loads(line)
    assert result["usage"]["outputTokens"] > 0  # the summary call, paid for
    assert result["costUsd"] > 0
    assert is_compaction(bodies(fake_llm)[-1])

    fake_llm.add(Reply(text="Nothing is left."))
    after = await dsh.run("-p", "what is left?", "--resume", session_id)
    assert after.code == 0, after.stderr
    request = bodies(fake_llm)[-1]
    assert SUMMARY in all_text(request)
    assert "first report: alpha" not in all_text(request)
    assert "check the second report" in all_text(request)

    events = await checked(dsh, fake_llm, session_id)
    [summary] = [e.data for e in events if isinstance(e.data, CompactionSummary)]
    [ended] = [e.data for e in events if isinstance(e.data, CompactionEnd)]
    assert ended.error is None
    assert ended.turn is None
    assert summary.context_tokens is not None
    assert summary.context_tokens < WINDOW
    runs = [e.data.name for e in of_type(events, "command/run")]
    assert runs == ["compact"]


async def test_a_failed_compact_headless_exits_1_and_changes_nothing(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        Reply(tool_calls=[echo("first report: alpha")]),
        Reply(text="Echoed the first report."),
        Reply(text="The second report is fine."),
    )
    assert (await dsh.run("-p", "echo the first report")).code == 0
    [session_id] = await dsh.session_ids()
    assert (await dsh.run("-p", "check the second report", "--resume", session_id)).code == 0
    before = await dsh.events(session_id)

    fake_llm.add(Reply(text="The user wanted a summary that never", cut_after=5))
    done = await dsh.run("-p", "/compact", "--resume", session_id)
    assert done.code == 1
    assert "dsh: compaction failed: " in done.stderr

    events = await dsh.events(session_id)
    [ended] = [e.data for e in events if isinstance(e.data, CompactionEnd)]
    assert ended.error
    assert not of_type(events, "compaction/summary")
    # History is what it was: the same surface events, nothing replaced.
    surface = [e for e in events if e.surface_op is not None]
    assert surface == [e for e in before if e.surface_op is not None]

    fake_llm.add(Reply(text="Still here."))
    assert (await dsh.run("-p", "still there?", "--resume", session_id)).code == 0
    assert "first report: alpha" in all_text(bodies(fake_llm)[-1])
    await checked(dsh, fake_llm, session_id)


async def test_automatic_compaction_end_to_end(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[echo(BIG1)]),
        Reply(text="Echoed the first report."),
    )
    first = await dsh.run("-p", "echo the first report")
    assert first.code == 0, first.stderr
    [session_id] = await dsh.session_ids()

    # The second turn's tool call takes the context past 85 % of the 20,000 window:
    # its next request is preceded by a compaction.
    fake_llm.add(
        Reply(tool_calls=[echo(BIG2)]),
        Reply(text=SUMMARY),
        Reply(text="Echoed the second report."),
    )
    second = await dsh.run("-p", "now echo the second report", "--resume", session_id)
    assert second.code == 0, second.stderr
    assert second.stdout == "Echoed the second report.\n"

    requests = bodies(fake_llm)
    assert [is_compaction(b) for b in requests] == [False, False, False, True, False]
    after = requests[-1]
    assert SUMMARY in all_text(after)
    assert BIG1 not in all_text(after)
    assert "echo the first report" not in all_text(after)
    assert BIG2 in all_text(after)

    events = await checked(dsh, fake_llm, session_id)
    [started] = [e.data for e in events if isinstance(e.data, CompactionStart)]
    assert started.turn == 2
