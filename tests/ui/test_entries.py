"""The transcript fold: what a real turn looks like as entries, live and replayed."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.kernel import Context
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.session import EventType, SessionEvent, TurnStart, parse_event, register_events
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ChecklistView, TextView
from dsh.transcript import Transcript, fold_step, register_entries, register_fold_step
from dsh.ui.entries import (
    AnswerEntry,
    ContextEntry,
    NoticeEntry,
    ReasoningEntry,
    ToolEntry,
    TranscriptFold,
    TurnFooter,
    UserEntry,
    ViewEntry,
)
from dsh.wire import Frozen
from tests.support.echo_tool import plugin as echo_plugin


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
    from dsh.kernel import Candidate

    await started.plugins.load([Candidate("echo", "tests", echo_plugin)])
    yield started
    await started.aclose()


def shape(fold: TranscriptFold) -> list[tuple[str, str]]:
    out = []
    for entry in fold.entries:
        match entry:
            case UserEntry(text=text):
                out.append(("user", text))
            case AnswerEntry() | ReasoningEntry():
                out.append((type(entry).__name__, entry.text))
            case ToolEntry(name=name, status=status):
                out.append(("tool", f"{name} {status} {(entry.result or '')[:12]}"))
            case TurnFooter(outcome=outcome):
                out.append(("footer", outcome))
            case ContextEntry():
                pass
            case _:
                out.append((type(entry).__name__, getattr(entry, "text", "")))
    return out


async def test_a_turn_folds_the_same_live_and_from_the_log(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(
            reasoning="let me check",
            text="Checking.",
            tool_calls=[
                ToolCallSpec(name="echo", arguments={"text": "hi"}),
                ToolCallSpec(name="shout", arguments={"text": "no"}),
            ],
        )
    )
    fake_llm.add(Reply(text="All **done**."))
    agent = await runtime.agents.create(tmp_path)
    live = TranscriptFold(cost=runtime.llm.cost)
    changes: list[str] = []

    def follow(event: SessionEvent) -> None:
        changes.extend(e.key for e in live.apply(event))

    agent.session.subscribe(follow)
    agent.followup(user_text("please check"))
    await agent.when_idle()

    expected = [
        ("user", "please check"),
        ("ReasoningEntry", "let me check"),
        ("AnswerEntry", "Checking."),
        ("tool", "echo done echo: hi"),
        ("tool", "shout denied Error: shout"),
        ("AnswerEntry", "All **done**."),
        ("footer", "completed"),
    ]
    assert shape(live) == expected
    assert live.status.state == "idle"
    assert live.status.usage is not None
    assert live.status.usage.output_tokens > 0
    assert live.status.cost is not None
    assert live.status.cost > 0
    assert live.status.model == "deepseek-flash"
    footer = live.entries[-1]
    assert isinstance(footer, TurnFooter)
    assert footer.usage is not None
    assert "block:1.1.0" in changes  # streamed entries are reported as they change
    await runtime.sessions.flush(agent.session)

    replayed = TranscriptFold(cost=runtime.llm.cost)
    for event in agent.session.events:
        replayed.apply(event)
    assert shape(replayed) == expected
    assert replayed.status.usage == live.status.usage


@pytest.mark.usefixtures("bundled_vocabulary")
async def test_queued_followups_and_todos_are_tracked(tmp_path: Path) -> None:
    from dsh.session.payloads import InboxClaimed, InboxEnqueued
    from dsh_plugins.todo import TodoItem, TodoWrite

    fold = TranscriptFold()

    def event(seq: int, type_: str, data: object) -> SessionEvent:
        return SessionEvent(type=type_, seq=seq, time=1000 + seq, data=data)  # type: ignore[arg-type]

    fold.apply(
        event(
            0,
            "inbox/enqueued",
            InboxEnqueued(item_id="a", message=user_text("later"), placement="queued"),
        )
    )
    assert [q.text for q in fold.queued.values()] == ["later"]
    fold.apply(event(1, "todo/write", TodoWrite(todos=(TodoItem(content="x", status="pending"),))))
    # The todo plugin's fold step shows the list in a panel beside the prompt.
    assert fold.panels == {"todo": ChecklistView(title="Todos", items=(("x", "pending"),))}
    fold.apply(event(2, "inbox/claimed", InboxClaimed(item_ids=("a",))))
    fold.apply(event(3, "turn/start", TurnStart(turn=1)))
    assert fold.queued == {}
    assert fold.panels == {}  # a turn starts without the last one's panels


# ---------------------------------------------------------------------- plugin events


class Pinned(Frozen):
    note: str


def show_pin(event: SessionEvent, transcript: Transcript) -> None:
    note = event.data.note
    transcript.notice(event, "info", f"Pinned: {note}")
    transcript.view(event, TextView(title="Pinned note", body=note), key="card")
    transcript.set_activity("pinning")
    transcript.set_context_tokens(42)
    transcript.set_panel("notes", ChecklistView(title="Notes", items=((note, "pending"),)))


PINNED = EventType("notes/pinned", Pinned, title=lambda data: f"Notes: {data.note}")


def pinned(seq: int, note: str) -> SessionEvent:
    return SessionEvent("notes/pinned", seq, 1000 + seq, Pinned(note=note))


async def test_a_plugins_events_fold_by_its_own_step(tmp_path: Path) -> None:
    from rich.console import Console

    from dsh.ui.plain_printer import TranscriptPrinter
    from dsh.ui.render import render_status
    from dsh.ui.tui.transcript_view import PluginView, build_view

    owner = Context(name="notes")
    register_events(owner, PINNED)
    register_entries(owner, "notes/pinned", show_pin)
    try:
        fold = TranscriptFold()
        out = io.StringIO()
        printer = TranscriptPrinter(Console(file=out, width=80), None, fold)
        printer(SessionEvent("turn/start", 0, 1000, TurnStart(turn=1)))
        printer(pinned(1, "ship it \x1b]0;pwned\x07"))

        notice, card = fold.entries
        assert isinstance(notice, NoticeEntry)
        assert (notice.level, notice.text) == ("info", "Pinned: ship it ␛]0;pwned␇")
        assert isinstance(card, ViewEntry)
        assert (notice.key, card.key) == ("notes/pinned:1.0", "notes/:card")
        assert fold.status.state == "pinning"
        assert "pinning" in render_status(fold.status).plain
        assert fold.status.context_tokens == 42
        assert fold.status.title == "Notes: ship it ␛]0;pwned␇"  # what its type declares
        assert set(fold.panels) == {"notes"}
        assert isinstance(build_view(card, None, live=True), PluginView)
        # Plain mode prints both, with the control characters made visible.
        printed = out.getvalue()
        assert "Pinned: ship it ␛]0;pwned␇" in printed
        assert "Pinned note" in printed
        assert "\x1b]0;" not in printed

        # A later event's step that names the same key changes that entry.
        changed = fold.apply(pinned(2, "and this"))
        assert [type(entry).__name__ for entry in changed] == ["NoticeEntry", "ViewEntry"]
        assert changed[1] is card
        assert card.view == TextView(title="Pinned note", body="and this")
        assert len(fold.entries) == 3

        fold.apply(SessionEvent("turn/start", 3, 2000, TurnStart(turn=2)))
        assert fold.panels == {}  # a new turn starts without the panels
    finally:
        await owner.dispose()
    # The plugin gone, its events are opaque and show nothing.
    stored = parse_event(pinned(4, "later").to_dict())
    assert fold.apply(stored) == []
    assert fold.status.title == "Notes: and this"


async def test_a_failing_fold_step_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: SessionEvent, transcript: Transcript) -> None:
        transcript.notice(event, "warning", "about to fail")
        raise RuntimeError("plugin bug")

    owner = Context(name="notes")
    register_events(owner, PINNED)
    register_entries(owner, "notes/pinned", broken)
    try:
        fold = TranscriptFold()
        with caplog.at_level(logging.ERROR, logger="dsh.ui.entries"):
            changed = fold.apply(pinned(0, "x"))
        assert [entry.text for entry in changed] == ["about to fail"]  # type: ignore[attr-defined]
        assert "plugin bug" in caplog.text
        with pytest.raises(RuntimeError, match="fold steps"):
            fold.notice(pinned(1, "y"), "info", "outside a step")
    finally:
        await owner.dispose()


def test_fold_steps_are_one_per_type_and_never_for_core_types() -> None:
    def other(event: SessionEvent, transcript: Transcript) -> None:
        pass

    with pytest.raises(ValueError, match="core event type"):
        register_fold_step("turn/start", show_pin)
    unregister = register_fold_step("notes/pinned", show_pin)
    try:
        with pytest.raises(ValueError, match="already has a fold step"):
            register_fold_step("notes/pinned", other)
        again = register_fold_step("notes/pinned", show_pin)  # a second runtime's
        unregister()
        assert fold_step("notes/pinned") is show_pin
        again()
        assert fold_step("notes/pinned") is None
    finally:
        unregister()


def test_a_legacy_model_notice_shows_in_the_transcript_and_plain_mode() -> None:
    from rich.console import Console

    from dsh.session.payloads import ModelRenamed
    from dsh.ui.plain_printer import TranscriptPrinter

    fold = TranscriptFold()
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=200), None, fold)
    printer(SessionEvent("turn/start", 0, 1000, TurnStart(turn=1)))
    renamed = ModelRenamed(provider="deepseek", model="deepseek-v4-flash", sent_as="deepseek-flash")
    printer(SessionEvent("model/renamed", 1, 1001, renamed))

    (notice,) = fold.entries
    assert isinstance(notice, NoticeEntry)
    said = "deepseek/deepseek-v4-flash is a legacy id: requests are sent as deepseek-flash"
    assert notice.level == "info"
    assert notice.text.startswith(said)
    assert out.getvalue().count(said) == 1


def test_a_retry_is_said_in_the_transcript_and_plain_mode_and_the_status_says_retrying() -> None:
    from rich.console import Console

    from dsh.llm import BlockStart, LlmFailure
    from dsh.session import AssistantChunk
    from dsh.session.payloads import LlmRetry
    from dsh.ui.plain_printer import TranscriptPrinter
    from dsh.ui.render import render_status

    fold = TranscriptFold()
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=200), None, fold)
    printer(SessionEvent("turn/start", 0, 1000, TurnStart(turn=1)))
    failure = LlmFailure(message="deepseek sent nothing for 120 s", code="TIMEOUT")
    retry = LlmRetry(
        retry_id="r",
        turn=1,
        step=1,
        provider="deepseek",
        retry=2,
        max_retries=5,
        delay_ms=1000,
        failure=failure,
    )
    printer(SessionEvent("llm/retry", 1, 1001, retry))

    (notice,) = fold.entries
    said = "deepseek sent nothing for 120 s - retry 2 of 5 in 1.0 s"
    assert isinstance(notice, NoticeEntry)
    assert notice.level == "warning"
    assert notice.text == said
    assert out.getvalue().count(said) == 1
    assert fold.status.state == "retrying"
    assert "retrying" in render_status(fold.status).plain
    chunk = AssistantChunk(turn=1, step=1, chunk=BlockStart(index=0, block_type="text"))
    printer(SessionEvent("assistant/chunk", 2, 1002, chunk))
    assert fold.status.state == "answering"  # the attempt streams again


def test_the_retries_of_one_request_are_one_notice_saying_the_latest() -> None:
    """A request tried again and again keeps one notice in the transcript, updated to
    the latest attempt (a second entry under its key was never drawn by the TUI, which
    went on showing "retry 1"); plain mode prints a line for each."""
    from rich.console import Console

    from dsh.llm import LlmFailure
    from dsh.session.payloads import LlmRetry
    from dsh.ui.plain_printer import TranscriptPrinter

    fold = TranscriptFold()
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=200), None, fold)
    printer(SessionEvent("turn/start", 0, 1000, TurnStart(turn=1)))
    failure = LlmFailure(message="deepseek server error (500)", code="SERVER")
    for number in (1, 2, 3):
        retry = LlmRetry(
            retry_id="r",
            turn=1,
            step=1,
            provider="deepseek",
            retry=number,
            max_retries=5,
            delay_ms=500 * number,
            failure=failure,
        )
        printer(SessionEvent("llm/retry", number, 1000 + number, retry))

    (notice,) = fold.entries
    assert isinstance(notice, NoticeEntry)
    assert notice.text == "deepseek server error (500) - retry 3 of 5 in 1.5 s"
    printed = out.getvalue()
    assert [f"retry {n} of 5" in printed for n in (1, 2, 3)] == [True, True, True]


async def test_a_rewind_drops_the_rewound_turns_and_says_so_once(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "hi"})]),
        Reply(text="First done."),
        Reply(text="Second done."),
        Reply(text="Third done."),
        Reply(text="Again done."),
    )
    agent = await runtime.agents.create(tmp_path)
    live = TranscriptFold(cost=runtime.llm.cost)
    agent.session.subscribe(live.apply)
    for prompt in ("first", "second", "third"):
        agent.followup(user_text(prompt))
        await agent.when_idle()
    cost = live.status.cost

    agent.rewind(3)
    agent.rewind(2)
    agent.followup(user_text("second, again"))
    await agent.when_idle()

    said = [
        ("user", "first"),
        ("tool", "echo done echo: hi"),
        ("AnswerEntry", "First done."),
        ("footer", "completed"),
        # The notice of the rewind to turn 3 went with turn 2, which it followed.
        ("NoticeEntry", "Rewound to before turn 2."),
        ("user", "second, again"),
        ("AnswerEntry", "Again done."),
        ("footer", "completed"),
    ]
    cache_notices = [entry for entry in shape(live) if entry[1].startswith("The prompt cache")]
    expected = said[:6] + cache_notices + said[6:]
    assert shape(live) == expected
    # The rewound turns' messages are gone from history: the next request can reuse
    # the cached prefix only up to where they began, and the transcript says so.
    (notice,) = cache_notices
    assert notice[1].startswith("The prompt cache holds only the first ")
    assert "(the conversation: rewritten from message " in notice[1]
    assert live.rewinds == 2
    tool = next(entry for entry in live.entries if isinstance(entry, ToolEntry))
    assert live.get(tool.key) is tool
    assert live.get("block:2.1.0") is None  # turn 2's answer, dropped
    # What was paid for still counts.
    assert cost is not None
    assert live.status.cost is not None
    assert live.status.cost > cost
    replayed = TranscriptFold(cost=runtime.llm.cost)
    for event in agent.session.events:
        replayed.apply(event)
    assert shape(replayed) == expected


def test_a_rewind_the_fold_has_no_turn_start_for_changes_nothing() -> None:
    fold = TranscriptFold()
    fold.apply(parse_event({"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}))
    fold.apply(
        parse_event(
            {
                "type": "user/message",
                "seq": 1,
                "time": 1,
                "data": user_text("kept").model_dump(mode="json"),
                "surfaceOp": "append",
            }
        )
    )
    rewind = {"type": "history/rewound", "seq": 2, "time": 2, "data": {"turn": 1, "toSeq": 1}}
    fold.apply(parse_event(rewind))
    assert shape(fold) == [
        ("user", "kept"),
        ("NoticeEntry", "A rewind to before turn 1 could not be applied: ignored."),
    ]
    assert fold.rewinds == 0
