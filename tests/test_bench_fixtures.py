"""The benchmarks' realistic session (bench/fixtures.py) is a log dsh itself could have
written: sound by the log's invariants, its tool calls ones the real tools accept, and
unchanged through the JSONL backend, written in the batches the writer makes."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from dsh.llm import user_text
from dsh.runtime import start_runtime
from dsh.session.invariants import check_log
from dsh.session.session import Session
from dsh.session.store import make_persistence
from dsh.testing import FakeLLM, Reply
from dsh_plugins.bash.tool import BashArguments
from dsh_plugins.fs.arguments import ReadArguments

# bench/ holds scripts, not a package: the module is loaded from its file, leaving
# sys.path alone (the scripts' names, loop, report..., would shadow others')
_spec = importlib.util.spec_from_file_location(
    "bench_fixtures", Path(__file__).resolve().parent.parent / "bench" / "fixtures.py"
)
assert _spec is not None
assert _spec.loader is not None
fixtures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = fixtures
_spec.loader.exec_module(fixtures)


def a_small_session(cwd: str = "/home/dev/project") -> Session:
    plan = fixtures.a_working_session(random.Random(7), turns=2, calls=4)
    return fixtures.replay(fixtures.a_header("bench-fixture-test", cwd), plan)


async def written(session: Session, home: Path) -> None:
    persistence = make_persistence("jsonl", home)
    await persistence.create(session.header)
    for batch in fixtures.writer_batches(session.events):
        await persistence.append(session.header.id, batch)
    await persistence.close()


def test_the_working_session_keeps_the_logs_invariants() -> None:
    session = a_small_session()

    assert check_log(session.events) == []
    types = [event.type for event in session.events]
    assert types.count("turn/start") == 2
    assert types.count("tool/call") == types.count("tool/result") == 8
    assert types.count("step/start") == 10  # four calls and the answer, twice


def test_its_tool_calls_are_what_the_real_tools_take() -> None:
    calls = [e.data for e in a_small_session().events if e.type == "tool/call"]

    assert calls
    for call in calls:
        arguments = json.loads(call.arguments)
        match call.name:
            case "read":
                assert ReadArguments.model_validate(arguments).file_path.endswith(".py")
            case "bash":
                assert BashArguments.model_validate(arguments).description
            case other:
                raise AssertionError(f"a tool the fixture should not call: {other}")


async def test_it_round_trips_through_jsonl_in_writer_batches(tmp_path: Path) -> None:
    session = a_small_session()
    await written(session, tmp_path)

    loaded = await make_persistence("jsonl", tmp_path).load(session.header.id)

    assert not loaded.issues
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in session.events]


async def test_dsh_resumes_it_and_sends_its_history_on(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    session = a_small_session(str(project))
    await written(session, home)
    fake_llm.add(Reply(text="and that"))
    runtime = await start_runtime(
        home=home,
        cwd=project,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"generate": False},
        },
    )
    try:
        agent = await runtime.agents.resume(session.header.id)
        agent.followup(user_text("and now?"))
        await agent.when_idle()
        events = list(agent.session.events)
    finally:
        await runtime.aclose()

    assert check_log(events) == []
    assert [e.data.reason.kind for e in events if e.type == "turn/end"] == ["completed"] * 3
    sent = fake_llm.chat_requests[-1].body["messages"]
    results = [e.data.message.result for e in session.events if e.type == "tool/result"]
    for result in results:
        assert any(m.get("tool_call_id") == result.tool_call_id for m in sent)
    assert sent[-1]["content"].endswith("and now?")
