"""User hooks at a session's edges, through the real binary: ``PreCompact`` before a
summary replaces the history (manual and automatic), ``SessionEnd`` when the agent is
disposed, and the ``transcript_path`` every payload carries."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply
from tests.e2e.harness import TIMEOUT, Dsh, finish, of_type
from tests.e2e.test_subagents import headers, task
from tests.e2e.test_user_hooks import HOOK, configure, hook_table, records
from tests.plugins.compaction.support import MODULES, WINDOW, echo, is_compaction

COMPACTION_SETTINGS = f"""\
[plugins]
modules = {MODULES!r}

[plugins.llm-deepseek.retry]
max_retries = 0

[plugins.llm-deepseek.models.deepseek-flash]
context_window = {WINDOW}
""".replace("'", '"')
SUMMARY = "The user had a report echoed; nothing is pending."


def configure_compaction(dsh: Dsh, *tables: str) -> None:
    (dsh.home / "settings.toml").write_text(COMPACTION_SETTINGS + "".join(tables))


async def two_turns(dsh: Dsh, fake_llm: FakeLLM) -> str:
    """A stored session with enough history for /compact to summarise."""
    fake_llm.add(
        Reply(tool_calls=[echo("first report: alpha")]),
        Reply(text="Echoed the first report."),
        Reply(text="The second report is fine."),
    )
    assert (await dsh.run("-p", "echo the first report")).code == 0
    [session_id] = await dsh.session_ids()
    assert (await dsh.run("-p", "check the second report", "--resume", session_id)).code == 0
    return session_id


async def test_pre_compact_gets_the_documented_json_before_the_summary(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "compact.jsonl"
    configure_compaction(dsh, hook_table("PreCompact", record, "ok", matcher="manual"))
    session_id = await two_turns(dsh, fake_llm)
    fake_llm.add(Reply(text=SUMMARY))
    done = await dsh.run("-p", "/compact keep the API notes", "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]
    assert is_compaction(fake_llm.chat_requests[-1].body)
    [payload] = records(record)
    assert payload["hook_event_name"] == "PreCompact"
    assert payload["trigger"] == "manual"
    assert payload["custom_instructions"] == "keep the API notes"
    assert payload["session_id"] == session_id
    transcript = Path(payload["transcript_path"])
    assert transcript.name == "session.jsonl"
    assert session_id in transcript.read_text()  # the session's own log, as it stood
    events = await dsh.events(session_id)
    assert len(of_type(events, "compaction/summary")) == 1


async def test_a_blocking_pre_compact_hook_stops_the_compaction(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "compact.jsonl"
    configure_compaction(dsh, hook_table("PreCompact", record, "block"))
    session_id = await two_turns(dsh, fake_llm)
    before = await dsh.events(session_id)
    sent = len(fake_llm.chat_requests)

    done = await dsh.run("-p", "/compact", "--resume", session_id)
    assert done.code == 1
    assert "compaction refused: prompts about passwords are blocked" in done.stderr
    assert len(fake_llm.chat_requests) == sent  # no summary request reached the server
    [payload] = records(record)
    assert (payload["trigger"], payload["custom_instructions"]) == ("manual", "")

    events = await dsh.events(session_id)
    assert not of_type(events, "compaction/start")
    assert not of_type(events, "compaction/summary")
    surface = [e for e in events if e.surface_op is not None]
    assert surface == [e for e in before if e.surface_op is not None]  # history as it was
    [ran] = of_type(events, "hooks/ran")
    assert (ran.data.event, ran.data.outcome) == ("PreCompact", "blocked")


async def test_a_refused_automatic_compaction_is_not_retried_in_the_turn(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """The context passes the threshold twice in one turn: the hook is asked once, the
    turn goes on without a summary."""
    record = dsh.root / "compact.jsonl"
    configure_compaction(dsh, hook_table("PreCompact", record, "block", matcher="auto"))
    big = "alpha " * 2_700
    fake_llm.add(Reply(tool_calls=[echo(big)]), Reply(text="Echoed the first report."))
    assert (await dsh.run("-p", "echo the first report")).code == 0
    [session_id] = await dsh.session_ids()
    fake_llm.add(
        Reply(tool_calls=[echo("omega " * 2_700)]),
        Reply(tool_calls=[echo("once more")]),
        Reply(text="Echoed the rest."),
    )
    done = await dsh.run("-p", "echo the rest", "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "Echoed the rest.\n"
    assert not any(is_compaction(r.body) for r in fake_llm.chat_requests)
    [payload] = records(record)
    assert (payload["hook_event_name"], payload["trigger"]) == ("PreCompact", "auto")
    events = await dsh.events(session_id)
    assert not of_type(events, "compaction/summary")


async def test_session_end_is_awaited_before_dsh_p_exits(dsh: Dsh, fake_llm: FakeLLM) -> None:
    record = dsh.root / "end.jsonl"
    # The hook takes its time before it writes: dsh must wait for it before exiting.
    slow = json.dumps(f"sleep 1; {sys.executable} {HOOK} {record} ok")
    configure(dsh, f"[[hooks.SessionEnd]]\nhooks = [{{ command = {slow}, timeout = 30 }}]\n")
    fake_llm.add(Reply(text="Hi."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr[-3000:]
    [payload] = records(record)  # written by the time dsh exited
    [session_id] = await dsh.session_ids()
    assert payload["hook_event_name"] == "SessionEnd"
    assert payload["reason"] == "other"
    assert payload["session_id"] == session_id
    assert Path(payload["transcript_path"]).is_file()
    events = await dsh.checked_events()
    [ran] = of_type(events, "hooks/ran")  # logged in the session before it closed
    assert (ran.data.event, ran.data.exit_code) == ("SessionEnd", 0)


async def test_a_hanging_session_end_hook_is_killed_and_dsh_exits(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "end.jsonl"
    configure(dsh, hook_table("SessionEnd", record, "hang", timeout=1))
    fake_llm.add(Reply(text="Hi."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr[-3000:]
    events = await dsh.checked_events()
    [ran] = of_type(events, "hooks/ran")
    assert ran.data.timed_out


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
async def test_every_payload_names_the_sessions_log(
    dsh: Dsh, fake_llm: FakeLLM, backend: str
) -> None:
    record = dsh.root / "prompt.jsonl"
    configure(
        dsh,
        f'[storage]\nbackend = "{backend}"\n',
        hook_table("UserPromptSubmit", record, "ok"),
    )
    fake_llm.add(Reply(text="Noted."))
    done = await dsh.run("-p", "how is the build?")
    assert done.code == 0, done.stderr[-3000:]
    [payload] = records(record)
    transcript = Path(payload["transcript_path"])
    if backend == "jsonl":
        assert transcript.parent.parent.parent == dsh.home / "sessions"
        # Written up to the hook's own prompt: the session's start is in the file.
        first = json.loads(transcript.read_text().splitlines()[0])
        assert payload["session_id"] in json.dumps(first)
    else:
        assert transcript == dsh.home / "sessions.sqlite"
        assert transcript.is_file()


async def test_sigterm_ends_a_dsh_p_run_with_its_session_end_hook(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "end.jsonl"
    configure(dsh, hook_table("SessionEnd", record, "ok"))
    fake_llm.add(Reply(text="word " * 400, chunk_size=5, chunk_delay_ms=20))
    child = await dsh.start("-p", "talk")
    assert child.stdout is not None
    assert await asyncio.wait_for(child.stdout.read(5), TIMEOUT)  # the answer streams
    child.terminate()
    done = await finish(child, None)
    assert done.code == 143, done.stderr[-3000:]
    assert "dsh: terminated" in done.stderr
    [payload] = records(record)
    assert (payload["hook_event_name"], payload["reason"]) == ("SessionEnd", "other")
    events = await dsh.checked_events()
    [end] = of_type(events, "turn/end")
    assert end.data.reason.kind == "aborted"


async def test_an_untrusted_projects_session_end_and_pre_compact_hooks_never_run(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "evil.jsonl"
    (dsh.project / ".git").mkdir()
    (dsh.project / ".dsh").mkdir()
    project_settings = dsh.project / ".dsh" / "settings.toml"
    project_settings.write_text(
        hook_table("SessionEnd", record, "ok") + hook_table("PreCompact", record, "block")
    )
    project_settings.chmod(0o644)
    configure_compaction(dsh)
    session_id = await two_turns(dsh, fake_llm)
    fake_llm.add(Reply(text=SUMMARY))
    done = await dsh.run("-p", "/compact", "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]
    assert is_compaction(fake_llm.chat_requests[-1].body)  # not refused by the project
    assert not record.exists()


async def test_a_subagents_session_runs_no_session_end_hook(dsh: Dsh, fake_llm: FakeLLM) -> None:
    record = dsh.root / "end.jsonl"
    configure(dsh, hook_table("SessionEnd", record, "ok"))
    fake_llm.add(
        Reply(tool_calls=[task("greet", "MARK-G: say hello")]),
        Reply(text="Hello.", when="MARK-G"),
        Reply(text="Done."),
    )
    done = await dsh.run("-p", "delegate a greeting")
    assert done.code == 0, done.stderr[-3000:]
    stored = await headers(dsh)
    [parent] = [h.id for h in stored.values() if h.origin is None]
    [_child] = [h.id for h in stored.values() if h.origin == "subagent"]
    assert [p["session_id"] for p in records(record)] == [parent]  # the parent's alone
