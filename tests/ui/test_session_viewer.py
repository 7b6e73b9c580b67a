"""A subagent's session opened in the TUI: the read-only viewer, Enter on a card that
shows a child agent's run, and ``/agents``. The child sessions are written by a
test-only ``delegate`` tool (tests/support/delegate_tool.py) through the real
``sessions`` service; the viewer is the real app's."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.kernel import Candidate
from dsh.llm import user_text
from dsh.runtime import Runtime
from dsh.services import AGENTS, SESSIONS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.screens.picker import Picker
from dsh.ui.tui.screens.viewer import SessionViewer
from dsh.ui.tui.transcript_view import ToolCard
from tests.support.delegate_tool import plugin as delegate_plugin
from tests.ui.tui_support import finish_a_turn, screen_text, shown, tui, type_text, until

HOSTILE = "explore\x1b]2;pwned\x07 \x1b[31mred\x1b[0m"


@pytest.fixture
async def runtime_with_delegate(runtime: Runtime) -> Runtime:
    await runtime.plugins.load([Candidate("delegate", "tests", delegate_plugin)])
    return runtime


def delegation(description: str, prompt: str, reply: str) -> Reply:
    arguments = {"description": description, "prompt": prompt, "reply": reply}
    return Reply(tool_calls=[ToolCallSpec(name="delegate", arguments=arguments)])


def viewer_text(viewer: SessionViewer) -> str:
    """What the viewer's heading and transcript show, as plain text."""
    from textual.widgets import Static

    from dsh.ui.tui.streaming import AnswerView

    parts = [shown(viewer.query_one("#viewer-title", Static))]
    for widget in viewer.transcript.query("*"):
        if isinstance(widget, AnswerView):
            parts.append(widget.source)
        elif isinstance(widget, Static):
            parts.append(shown(widget))
    return "\n".join(parts)


def viewing(app: DshApp) -> SessionViewer | None:
    screen = app.screen
    return screen if isinstance(screen, SessionViewer) and screen.loaded else None


async def test_enter_on_a_subagent_card_opens_its_transcript_and_nothing_typed_reaches_the_agent(
    runtime_with_delegate: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(delegation("find the tests", "Where are the tests?", "They are in tests/."))
    fake_llm.add(Reply(text="The child found them."))
    async with tui(runtime_with_delegate, tmp_path, tmp_path / "home") as (app, pilot):
        await finish_a_turn(app, pilot, "delegate it")
        card = app.query_one(ToolCard)
        text = shown(card)
        assert "find the tests · completed" in text
        assert "… 4 earlier lines" in text  # nine lines of activity, the last five shown
        assert "read 3.py" not in text
        assert "read 4.py" in text
        assert "They are in tests/." in text
        assert "Enter: its transcript" in text
        view = card.agent_view()
        assert view is not None
        requests = len(fake_llm.requests)

        await pilot.press("ctrl+up", "enter")
        await until(pilot, lambda: viewing(app) is not None, what="the viewer")
        viewer = viewing(app)
        assert viewer is not None
        assert viewer.session_id == view.session_id
        assert not viewer.live  # written and closed by the tool: read from storage
        text = viewer_text(viewer)
        assert "Where are the tests?" in text
        assert "They are in tests/." in text
        assert "find the tests" in text
        assert "completed" in text

        # Keys in the viewer are its own: nothing is sent, nothing is cancelled, the
        # prompt behind gets nothing.
        await pilot.press("h", "i", "enter", "tab", "ctrl+c")
        await pilot.pause()
        assert app.screen is viewer
        assert len(fake_llm.requests) == requests
        assert app.prompt_area.text == ""
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionViewer), what="back")
        assert app.prompt_area.text == ""
        assert len(fake_llm.requests) == requests
        assert "The child found them." in screen_text(app)


async def test_the_viewer_follows_a_live_session_until_it_closes(
    runtime_with_delegate: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime = runtime_with_delegate
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "a draft, not sent")
        child = await runtime.root.get(AGENTS).create(tmp_path)
        await app.view_session(child.id, "a live child")
        await until(pilot, lambda: viewing(app) is not None, what="the viewer")
        viewer = viewing(app)
        assert viewer is not None
        assert viewer.live
        assert "following" in viewer_text(viewer)

        fake_llm.add(Reply(text="Working on it live."))
        child.followup(user_text("go on, child"))
        await until(
            pilot, lambda: "Working on it live." in viewer_text(viewer), what="the live answer"
        )
        await until(pilot, lambda: "completed" in viewer_text(viewer), what="its turn's end")
        assert "go on, child" in viewer_text(viewer)

        await pilot.press("q")
        await until(pilot, lambda: not isinstance(app.screen, SessionViewer), what="back")
        assert app.prompt_area.text == "a draft, not sent"
        shown_entries = len(viewer.fold.entries) if viewer.fold else 0
        fake_llm.add(Reply(text="After the viewer closed."))
        child.followup(user_text("once more"))
        await child.when_idle()
        await until(pilot, lambda: child.status == "idle" and len(fake_llm.requests) == 2)
        assert viewer.fold is not None
        assert len(viewer.fold.entries) == shown_entries


async def test_agents_lists_this_sessions_subagents_newest_first_and_opens_one(
    runtime_with_delegate: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(delegation("first child", "First question?", "First answer."))
    fake_llm.add(delegation(HOSTILE, "Second \x1b[2J question?", "Second answer."))
    fake_llm.add(Reply(text="Both done."))
    runtime = runtime_with_delegate
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await finish_a_turn(app, pilot, "delegate twice")
        parent = app.agent
        assert parent is not None
        # A fork names this session as its parent too, but is no subagent's.
        await parent.flush()
        fork = await runtime.root.get(SESSIONS).fork(parent.id)
        await runtime.root.get(SESSIONS).close(fork)

        await type_text(app, pilot, "/agents")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the list")
        picker = app.screen
        assert isinstance(picker, Picker)
        items = [str(item) for item in picker.items]
        assert len(items) == 2  # not the fork
        assert items[0].startswith("Second ␛[2J question?")  # newest first, shown as pictures
        assert "First question?" in items[1]
        assert all("completed" in item for item in items)
        assert not any("\x1b" in item for item in items)

        await pilot.press("enter")
        await until(pilot, lambda: viewing(app) is not None, what="the viewer")
        viewer = viewing(app)
        assert viewer is not None
        text = viewer_text(viewer)
        assert "Second answer." in text
        assert "First answer." not in text
        assert "\x1b" not in text
        assert "␛[2J" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionViewer), what="back")

        # The card of the hostile child shows its description as pictures too.
        cards = list(app.query(ToolCard))
        hostile = shown(cards[1])
        assert "\x1b" not in hostile
        assert "\x07" not in hostile
        assert "explore␛]2;pwned␇ ␛[31mred␛[0m" in hostile


async def test_agents_without_subagents_says_so(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="No children here."))
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await finish_a_turn(app, pilot, "hello")
        await type_text(app, pilot, "/agents")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: "No subagents have run in this session." in screen_text(app),
            what="the notice",
        )
        assert not isinstance(app.screen, Picker | SessionViewer)


async def test_the_task_tools_card_opens_the_child_and_agents_follows_a_running_one(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The bundled subagents plugin's ``task`` tool end to end: its card is an
    AgentView that opens the child's session; a child still at work is ``running`` in
    ``/agents`` and followed live."""
    task = {"description": "look around", "prompt": "MARK-A: list the files"}
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="task", arguments=task)]),
        Reply(text="There are three files.", when="MARK-A"),
        Reply(text="The child counted three."),
    )
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await finish_a_turn(app, pilot, "delegate")
        card = app.query_one(ToolCard)
        view = card.agent_view()
        assert view is not None
        assert view.title == "Task: look around"
        assert view.status == "completed"
        assert "There are three files." in shown(card)
        await pilot.press("ctrl+up", "enter")
        await until(pilot, lambda: viewing(app) is not None, what="the viewer")
        viewer = viewing(app)
        assert viewer is not None
        assert viewer.session_id == view.session_id
        text = viewer_text(viewer)
        assert "MARK-A: list the files" in text
        assert "There are three files." in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionViewer), what="back")

        # A child at work: its echo call sleeps until the parent's turn is cancelled.
        slow = {"description": "wait a while", "prompt": "MARK-B: wait"}
        fake_llm.add(
            Reply(tool_calls=[ToolCallSpec(name="task", arguments=slow)]),
            Reply(
                text="Waiting.",
                tool_calls=[ToolCallSpec(name="echo", arguments={"text": "hi", "delay": 600})],
                when="MARK-B",
            ),
        )
        await type_text(app, pilot, "delegate a slow one")
        await pilot.press("enter")
        agents = runtime.root.get(AGENTS)
        await until(
            pilot,
            lambda: any(a.session.header.parent_session for a in agents.list()),
            what="the child",
        )
        child = next(a for a in agents.list() if a.session.header.parent_session)
        await until(
            pilot,
            lambda: any(e.type == "tool/call" for e in child.session.events),
            what="the child's call",
        )
        await type_text(app, pilot, "/agents")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the list")
        picker = app.screen
        assert isinstance(picker, Picker)
        items = [str(item) for item in picker.items]
        assert "wait a while" in items[0]  # the running child's label: its task
        assert "running" in items[0]
        assert "completed" in items[1]
        await pilot.press("enter")
        await until(pilot, lambda: viewing(app) is not None, what="the viewer")
        viewer = viewing(app)
        assert viewer is not None
        assert viewer.live
        await until(pilot, lambda: "running · following" in viewer_text(viewer), what="live")
        assert "Waiting." in viewer_text(viewer)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionViewer), what="back")
        # The card cursor is where the viewer was opened from: Esc leaves it first;
        # the next cancels the parent's turn, and the child with it.
        await pilot.press("escape", "escape")
        await until(
            pilot,
            lambda: app.agent is not None and app.agent.status == "idle",
            what="the cancel",
        )
        assert child.status == "idle"
        assert any(e.type == "turn/end" for e in child.session.events)
