"""The transcript fold: what a real turn looks like as entries, live and replayed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.session import SessionEvent
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.entries import (
    AnswerEntry,
    ContextEntry,
    ReasoningEntry,
    ToolEntry,
    TranscriptFold,
    TurnFooter,
    UserEntry,
)
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
    assert live.status.model == "deepseek-v4-flash"
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
    from dsh.session.events import InboxClaimed, InboxEnqueued, TurnStart
    from dsh.tools import ChecklistView
    from plugins.todo import TodoItem, TodoWrite

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
