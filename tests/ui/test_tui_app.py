"""The TUI under Pilot: a real runtime, the scripted model, the real app.

A turn on screen: the answer streaming, tool cards and approvals, questions, the status
bar, steering, queueing, cancelling and quitting. The transcript, the prompt and the
commands have modules of their own (test_tui_transcript, test_tui_prompt_input,
test_tui_commands).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.entries import AnswerEntry, ToolEntry
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.question import QuestionScreen
from dsh.ui.tui.status import QueuePanel
from dsh.ui.tui.streaming import AnswerView, cut_point
from dsh.ui.tui.transcript_view import ReasoningView, ToolCard, Transcript
from tests.ui.tui_support import (
    home,
    screen_text,
    send_until_approval,
    shown,
    tui,
    type_text,
    until,
)


async def test_a_prompt_streams_an_answer_with_reasoning_and_a_footer(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(reasoning="Let me think.", text="Hello **there**.\n\n```python\nx = 1\n```"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "hi")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: (
                app.agent is not None
                and app.agent.status == "idle"
                and any(
                    e.key.startswith("footer") or type(e).__name__ == "TurnFooter"
                    for e in app.fold.entries
                )
            ),
            what="the turn to end",
        )
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "hi" in text
        assert "Hello **there**." in text
        assert "x = 1" in text
        assert "turn 1 · completed" in text
        reasoning = app.query_one(ReasoningView)
        assert "thought (13 chars)" in str(reasoning.render())
        await pilot.click(ReasoningView)
        assert "Let me think." in str(reasoning.render())
        status = str(app.status_bar.render())
        assert "idle" in status
        assert "tokens" in status
        assert app.prompt_area.text == ""


def drawn(view: AnswerView) -> str:
    """The text of the lines an answer's widget draws."""
    return "\n".join(view.render_line(y).text.rstrip() for y in range(view.size.height))


async def test_a_long_answer_streams_with_its_finished_blocks_settled(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 60 for i in range(30)]
    paragraphs[7] = "```python\nx = 1\n\ny = 2\n```"  # a blank line inside a fence
    answer = "\n\n".join(paragraphs)
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        entry = AnswerEntry("answer:t", 1, turn=1, step=1)
        view = AnswerView(entry, live=True)
        await app.query_one(Transcript).mount(view)
        for start in range(0, len(answer), 500):  # as if 500 characters came per flush
            entry.parts.append(answer[start : start + 500])
            view._next = 0.0  # as if the last lines were added long ago
            view.flush()
            assert view.shown == entry.text
            assert cut_point(view.tail) == -1  # only the block still being written
            assert all(block.count("```") % 2 == 0 for block in view.blocks)
        assert len(view.blocks) >= 3
        await pilot.pause()
        assert "Paragraph 29: word" in drawn(view)
        entry.parts.append("\n\nThe end.")
        entry.done = True
        view.flush()
        assert not view.live
        await pilot.pause()
        assert view.shown == entry.text
        assert "y = 2" in drawn(view)
        assert drawn(view).rstrip().endswith("The end.")


async def test_a_streaming_answer_lays_the_screen_out_only_when_it_gains_lines(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        entry = AnswerEntry("answer:t", 1, turn=1, step=1)
        view = AnswerView(entry, live=True)
        await app.query_one(Transcript).mount(view)
        await pilot.pause()
        layouts: list[bool] = []
        refresh = view.refresh

        def noted(*regions: Any, layout: bool = False, **rest: Any) -> AnswerView:
            layouts.append(layout)
            return refresh(*regions, layout=layout, **rest)

        monkeypatch.setattr(view, "refresh", noted)

        def arrives(text: str) -> bool:
            entry.parts.append(text)
            view._next = 0.0
            layouts.clear()
            view.flush()
            return any(layouts)

        assert arrives("One")
        assert not arrives(" line.")  # the same line, longer
        assert not arrives("\n\n")  # the same line, as markdown
        assert arrives("More")
        assert arrives("\nand more")
        assert view.shown == "One line.\n\nMore\nand more"
        await pilot.pause()
        assert "More" in drawn(view)


async def test_an_answer_that_ends_with_a_repaint_due_stays_on_screen(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """An answer that ends while a repaint is due (found by that repaint, or told at
    once) is drawn in full (it used to vanish into a blank gap when the timer that
    found it ended stopped itself)."""
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        for round_ in range(6):
            entry = AnswerEntry(f"answer:{round_}", 1, turn=1, step=round_)
            view = AnswerView(entry, live=True)
            await app.query_one(Transcript).mount(view)
            entry.parts.append(f"Answer number {round_}, streamed. ")
            view.sync()
            await until(pilot, lambda v=view: "streamed" in drawn(v), what="the live part")
            entry.parts.append("The end.")
            view.sync()  # a repaint is due
            entry.done = True
            if round_ % 2:
                view.sync()  # told at once; else the repaint due finds it
            await until(pilot, lambda v=view: not v.live, what="the end")
            await pilot.pause(0.3)
            assert f"Answer number {round_}, streamed. The end." in drawn(view), (
                f"round {round_}: the answer vanished"
            )


def test_cut_point_skips_blank_lines_inside_code_fences() -> None:
    assert cut_point("a\n\nb") == 3
    assert cut_point("a\n\n```\nx\n\ny") == 3
    assert cut_point("no blank line") == -1


async def test_a_tool_call_asks_for_approval_and_shows_a_card(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hey"})]))
    fake_llm.add(Reply(text="Done shouting."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        dialog = await send_until_approval(app, pilot, "shout hey")
        card = app.query_one(ToolCard)
        assert "awaiting approval" in str(card.render())
        assert "waiting for you" in str(app.status_bar.render())
        # Typed for the next prompt as the dialog opened: ignored by the dialog, and
        # put back in the prompt.
        dialog.guard.seconds = 30
        await pilot.press("n", "o", "w")
        await until(pilot, lambda: app.prompt_area.text == "now", what="the typing kept")
        assert app.screen is dialog
        dialog.guard.seconds = 0
        await pilot.press("y")
        await until(pilot, lambda: "Done shouting." in screen_text(app), what="the answer")
        assert not isinstance(app.screen, ApprovalScreen)
        assert app.prompt_area.text == "now"
        entry = card.entry
        assert isinstance(entry, ToolEntry)
        assert entry.status == "done"
        assert "HEY" in shown(card)


async def test_quitting_with_an_approval_open_ends_and_runs_nothing(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:

    marker = tmp_path / "ran"
    command = {"command": f"touch {marker}", "description": "Touch"}
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="bash", arguments=command)]))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await send_until_approval(app, pilot, "touch it")
        agent = app.agent
        assert agent is not None
        # Quit as Ctrl+Q does; the approval waiting must not hold the app open.
        app.run_worker(app.quit())
        await until(pilot, lambda: not app.is_running, what="the app to end")
    assert not marker.exists()
    resolved = [e.data for e in agent.session.events if e.type == "approval/resolved"]
    assert [r.outcome for r in resolved] == ["deny"]
    assert agent.session.events[-1].type == "turn/end"


async def test_a_denied_call_says_so_on_its_card(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "no"})]))
    fake_llm.add(Reply(text="Understood."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        dialog = await send_until_approval(app, pilot, "shout no")
        dialog.guard.seconds = 0  # read: the Enter that sent the prompt was not for it
        await pilot.press("n")
        await until(pilot, lambda: "Understood." in screen_text(app), what="the answer")
        card = app.query_one(ToolCard)
        assert card.has_class("failed")
        assert "denied" in shown(card)


async def test_a_question_is_answered_in_its_dialog(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    question = {
        "questions": [
            {
                "id": "color",
                "question": "Which colour?",
                "options": [{"label": "Red"}, {"label": "Blue"}],
            }
        ]
    }
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    fake_llm.add(Reply(text="Blue it is."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "ask me")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen), what="the question")
        asking = app.screen
        assert isinstance(asking, QuestionScreen)
        asking.guard.seconds = 0  # read: the Enter that sent the prompt was not for it
        await pilot.pause(0.3)
        status = str(app.status_bar.render())
        assert "waiting for you" in status
        assert "running" not in status
        await pilot.press("down", "enter")
        await until(pilot, lambda: "Blue it is." in screen_text(app), what="the answer")
        request = fake_llm.requests[-1].body
        tool_results = [m for m in request["messages"] if m["role"] == "tool"]
        assert "Blue" in tool_results[-1]["content"]
        assert "waiting for you" not in str(app.status_bar.render())


async def test_the_status_bar_shows_the_model_a_switch_chose(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="hi"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "hello")
        await pilot.press("enter")
        await until(pilot, lambda: app.agent.status == "idle" and fake_llm.requests, what="turn")
        await until(pilot, lambda: "deepseek-flash" in str(app.status_bar.render()))
        await type_text(app, pilot, "/model deepseek-v4-pro")
        await pilot.press("enter")
        await until(pilot, lambda: "deepseek-v4-pro" in str(app.status_bar.render()))
        # An id the provider does not list is refused, with what it may have meant.
        await type_text(app, pilot, "/model deepseek-v4-prp")
        await pilot.press("enter")
        await until(pilot, lambda: "does not list a model" in screen_text(app))
        assert "did you mean deepseek-v4-pro" in screen_text(app)
        await pilot.pause(0.1)
        assert screen_text(app).count("does not list a model") == 1  # said once
        assert app.agent.options.model == "deepseek-v4-pro"
        await type_text(app, pilot, "/model nonexistent-model-x --force")
        await pilot.press("enter")
        await until(pilot, lambda: app.agent.options.model == "nonexistent-model-x")


async def test_enter_while_running_steers_and_tab_queues(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "a", "delay": 1.5})])
    )
    fake_llm.add(Reply(text="First done."))
    fake_llm.add(Reply(text="Second done."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: app.query(ToolCard), what="the tool to start")
        await type_text(app, pilot, "later please")
        await pilot.press("tab")
        await until(pilot, lambda: app.query_one(QueuePanel).display, what="the queue panel")
        assert "later please" in str(app.query_one(QueuePanel).render())
        await type_text(app, pilot, "also this")
        await pilot.press("enter")
        await until(pilot, lambda: "Second done." in screen_text(app), limit=15, what="both turns")
        bodies = [r.body for r in fake_llm.requests]
        steer_request = bodies[1]
        users = [m["content"] for m in steer_request["messages"] if m["role"] == "user"]
        assert any("also this" in str(u) for u in users)
        last_users = [m["content"] for m in bodies[2]["messages"] if m["role"] == "user"]
        assert any("later please" in str(u) for u in last_users)


async def test_escape_cancels_the_turn(runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "a", "delay": 10})])
    )
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "slow")
        await pilot.press("enter")
        await until(pilot, lambda: app.query(ToolCard), what="the tool to start")
        await pilot.press("escape")
        await until(
            pilot, lambda: app.agent is not None and app.agent.status == "idle", what="the cancel"
        )
        await until(pilot, lambda: "cancelled" in screen_text(app), what="the footer")


async def test_ctrl_c_stops_a_reply_then_clears_then_quits_and_names_the_session(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="word " * 400, chunk_size=4, chunk_delay_ms=20))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "talk a lot")
        await pilot.press("enter")
        await until(pilot, lambda: app.fold.status.state == "answering", what="the reply")
        await pilot.press("ctrl+c")  # stops the reply; the app stays
        await until(pilot, lambda: app.agent.status == "idle", what="the cancel")
        await until(pilot, lambda: "cancelled" in screen_text(app), what="the footer")
        await pilot.pause(0.1)
        assert app.is_running
        assert "cancelling" not in str(app.status_bar.render())  # not stale
        session_id = app.agent.id
        await type_text(app, pilot, "half typed")
        await pilot.press("ctrl+c")  # clears the prompt
        assert app.prompt_area.text == ""
        assert app.is_running
        await pilot.press("ctrl+c")  # the first of two
        assert app.is_running
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running, what="the quit")
    assert app.resumable == session_id


async def test_shift_tab_cycles_the_permission_mode_and_the_bar_shows_it(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        assert runtime.root.get(APPROVALS).mode == "default"
        seen = []
        for _ in range(3):
            await pilot.press("shift+tab")
            await pilot.pause()
            mode = runtime.root.get(APPROVALS).mode  # a fresh view each time: the service's
            seen.append(mode)
            if mode != "default":
                assert mode in str(app.status_bar.render())
        assert seen == ["accept-edits", "plan", "default"]
        assert app.focused is app.prompt_area  # the key did not move the focus
        runtime.root.get(
            APPROVALS
        ).mode = "bypass"  # started so: a press leaves it, never enters it
        await pilot.press("shift+tab")
        await pilot.pause()
        assert runtime.root.get(APPROVALS).mode == "default"
        # /permissions switches the mode of the whole runtime, not of one view of it.
        await type_text(app, pilot, "/permissions read-only")
        await pilot.press("enter")
        await until(pilot, lambda: runtime.root.get(APPROVALS).mode == "read-only", what="mode")
        await until(pilot, lambda: "read-only" in str(app.status_bar.render()), what="bar")


async def test_queued_message_can_be_taken_back_with_up(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "a", "delay": 3})]))
    fake_llm.add(Reply(text="ok"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: app.query(ToolCard), what="the tool to start")
        await type_text(app, pilot, "queued text")
        await pilot.press("tab")
        await until(pilot, lambda: app.fold is not None and app.fold.queued, what="queued")
        await pilot.press("up")
        await until(pilot, lambda: app.prompt_area.text == "queued text", what="taken back")
        await until(pilot, lambda: not app.fold.queued, what="removed from the inbox")
        await until(pilot, lambda: app.agent.status == "idle", what="the end")
        assert len(fake_llm.requests) == 2


async def test_ctrl_c_clears_then_quits(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        # The quit window on a clock of the test's: a busy machine's slow key presses
        # are not a person's pause.
        now = [100.0]
        app.keys.ctrl_c.clock = lambda: now[0]
        await type_text(app, pilot, "draft")
        await pilot.press("ctrl+c")
        assert app.prompt_area.text == ""
        await pilot.press("ctrl+c")  # clearing was not the first press of a quit...
        await pilot.pause()
        assert app.is_running
        now[0] += 5  # ...and a press after the window is a first press again
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        now[0] += 0.5
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running, what="the app to quit")


async def test_messages_sent_as_the_first_turn_starts_keep_their_order(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Enter, Enter, Enter in one burst (issue 36's input fuzzer, seed 1869): the
    second came before the first's turn ran, so it waited as a prompt; the third came
    once it ran, steered it, and went out before the second."""
    fake_llm.add(Reply(text="one", gate="first"))
    for text in ("two", "three", "four"):
        fake_llm.add(Reply(text=text))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await app.submit("a")
        await app.submit("b")
        await until(pilot, lambda: fake_llm.chat_requests, what="the first turn's request")
        await app.submit("c")
        fake_llm.open_gate("first")
        await until(
            pilot,
            lambda: app.agent is not None and app.agent.status == "idle" and not app.fold.queued,
            what="every message answered",
        )
        users = [
            m["content"]
            for m in fake_llm.chat_requests[-1].body["messages"]
            if m["role"] == "user" and not str(m["content"]).startswith("Today's date")
        ]
        assert users == ["a", "b", "c"]
