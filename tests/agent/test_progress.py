"""Progress a running tool reports: paced into ``tool/progress`` events of its call,
dropped once the result is in, folded onto the call's card with nothing a terminal
would obey."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh.agent.progress import MAX_CHARS, ProgressLog
from dsh.llm import CallId, user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import TOOLS
from dsh.session import SessionEvent, ToolCall, ToolProgress, check_log
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ToolContext, ToolDefinition
from dsh.ui.entries import ToolEntry, TranscriptFold
from tests.support.waits import HANG_S


async def test_a_flood_of_reports_logs_the_first_and_then_the_latest() -> None:
    logged: list[tuple[CallId, str]] = []
    flushed = asyncio.Event()

    def append(call_id: CallId, text: str) -> None:
        logged.append((call_id, text))
        if len(logged) == 2:
            flushed.set()

    # A clock that never moves: every report after the first comes "too soon".
    progress = ProgressLog(append, interval=0.05, clock=lambda: 0.0)
    report = progress.reporter(CallId("c1"))
    for n in range(1, 1001):
        report(f"page {n}")
    assert logged == [("c1", "page 1")]  # the rest wait, each replacing the one before
    await asyncio.wait_for(flushed.wait(), HANG_S)
    assert logged == [("c1", "page 1"), ("c1", "page 1000")]


async def test_what_waits_when_the_call_ends_is_dropped_and_so_is_anything_later() -> None:
    logged: list[str] = []
    progress = ProgressLog(lambda _call, text: logged.append(text), clock=lambda: 0.0)
    report = progress.reporter(CallId("c1"))
    report("first")
    report("second")  # waits for the interval
    progress.end(CallId("c1"))
    report("after the result")
    await asyncio.sleep(0)
    assert logged == ["first"]
    assert progress._calls == {}  # no timer left behind


async def test_a_report_from_a_tools_thread_is_logged_on_the_loop() -> None:
    import threading

    logged: list[tuple[str, bool]] = []
    main = threading.get_ident()

    def append(_call: CallId, text: str) -> None:
        logged.append((text, threading.get_ident() == main))

    report = ProgressLog(append).reporter(CallId("c1"))
    await asyncio.to_thread(report, "from a thread")
    for _ in range(int(HANG_S / 0.01)):  # handed to the loop's thread: a hang guard
        if logged:
            break
        await asyncio.sleep(0.01)
    assert logged == [("from a thread", True)]


async def test_a_report_is_one_line_of_bounded_length() -> None:
    logged: list[str] = []
    progress = ProgressLog(lambda _call, text: logged.append(text))
    progress.reporter(CallId("c1"))("  downloading\n\tpart 2  " + "x" * 1000)
    [line] = logged
    assert line.startswith("downloading part 2 xxx")
    assert len(line) == MAX_CHARS


async def test_a_failing_log_does_not_fail_the_tool() -> None:
    def append(_call: CallId, _text: str) -> None:
        raise OSError("disk full")

    ProgressLog(append).reporter(CallId("c1"))("still going")  # logged as a warning


class Pages(BaseModel):
    pages: int


async def fetch_pages(args: Pages, context: ToolContext) -> str:
    for page in range(1, args.pages + 1):
        context.progress(f"page {page} of {args.pages}")
        await asyncio.sleep(0.3)  # past the interval: each report is logged
    return f"fetched {args.pages} pages"


PAGES = ToolDefinition(
    name="pages",
    description="Fetch pages, saying how far it got.",
    arguments=Pages,
    execute=fetch_pages,
    read_only=True,
)


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
    )
    started.root.get(TOOLS).register("pages", PAGES)
    yield started
    await started.aclose()


async def test_a_turn_logs_the_progress_of_its_call_between_call_and_result(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="pages", arguments={"pages": 2})]))
    fake_llm.add(Reply(text="Both pages are in."))
    agent = await runtime.agents.create(tmp_path)
    agent.followup(user_text("fetch two pages"))
    await agent.when_idle()

    events = agent.session.events
    types = [e.type for e in events]
    progress = [e for e in events if e.type == "tool/progress"]
    [call] = [e.data for e in events if e.type == "tool/call"]
    assert [e.data.message for e in progress] == ["page 1 of 2", "page 2 of 2"]
    assert all(e.data.call_id == call.call_id and e.ignorable for e in progress)
    assert types.index("tool/call") < events.index(progress[0])
    assert events.index(progress[-1]) < types.index("tool/result")
    assert check_log(events) == []
    # Never sent to the model: the next request holds the result, not the progress.
    body = str(fake_llm.chat_requests[1].body["messages"])
    assert "fetched 2 pages" in body
    assert "page 1 of 2" not in body


def event(seq: int, type_: str, data: object) -> SessionEvent:
    return SessionEvent(type=type_, seq=seq, time=1000 + seq, data=data)


def test_the_fold_shows_hostile_progress_as_pictures_on_the_running_card() -> None:
    fold = TranscriptFold()
    call_id = CallId("c1")
    fold.apply(
        event(0, "tool/call", ToolCall(turn=1, step=1, call_id=call_id, name="x", arguments="{}"))
    )
    hostile = "\x1b]52;c;ZXZpbA==\x07\x1b[2J 3/10\r\nrm -rf ~"
    [entry] = fold.apply(
        event(1, "tool/progress", ToolProgress(turn=1, step=1, call_id=call_id, message=hostile))
    )
    assert isinstance(entry, ToolEntry)
    assert entry.progress is not None
    assert not any(c in entry.progress for c in "\x1b\x07\n\r")
    assert "3/10" in entry.progress
    # A report for a call the fold never saw changes nothing.
    stray = ToolProgress(turn=1, step=1, call_id=CallId("other"), message="x")
    assert fold.apply(event(2, "tool/progress", stray)) == []
