"""The TUI under Pilot: a real runtime, the scripted model, the real app."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.entries import AnswerEntry, ToolEntry
from dsh.ui.tui.prompt_input import CompletionMenu
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.question import QuestionScreen
from dsh.ui.tui.status import QueuePanel
from dsh.ui.tui.streaming import AnswerView, cut_point
from dsh.ui.tui.transcript_view import ReasoningView, ToolCard, Transcript
from tests.ui.tui_support import (
    finish_a_turn,
    screen_text,
    send_until_approval,
    shown,
    tui,
    type_text,
    until,
)


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


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


async def test_text_and_enter_in_one_burst_send_the_whole_text(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Keys that arrive in one read (terminal automation, a fast typist) apply in the
    order typed: the Enter after them sends all of them (and Tab queues all)."""
    from textual import events

    fake_llm.add(Reply(text="first"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        for char in "list files":
            app.post_message(events.Key(char, char))
        app.post_message(events.Key("enter", "\r"))
        await until(pilot, lambda: len(fake_llm.chat_requests) == 1, what="the request")
        await until(pilot, lambda: app.agent.status == "idle", what="the turn")
        assert app.prompt_area.text == ""
        users = [m for m in fake_llm.chat_requests[0].body["messages"] if m["role"] == "user"]
        assert users[-1]["content"] == "list files"


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


async def test_page_keys_scroll_the_transcript_from_the_prompt(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="\n\n".join(f"Paragraph {i}." for i in range(80))))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "a long answer please")
        await pilot.press("enter")
        await until(pilot, lambda: "Paragraph 79." in screen_text(app), what="the answer")
        await until(pilot, lambda: app.agent.status == "idle", what="the turn")
        await pilot.pause(0.2)
        transcript = app.query_one(Transcript)
        bottom = transcript.scroll_y
        assert bottom > 0
        await type_text(app, pilot, "draft")
        await pilot.press("pageup")
        await pilot.pause(0.1)
        assert transcript.scroll_y < bottom
        assert app.prompt_area.text == "draft"  # the prompt is untouched
        await pilot.press("pagedown", "pagedown", "pagedown")
        await pilot.pause(0.1)
        assert transcript.scroll_y == bottom
        app.prompt_area.set_text("")
        await pilot.press("home")
        await pilot.pause(0.1)
        assert transcript.scroll_y == 0
        await pilot.press("end")
        await pilot.pause(0.1)
        assert transcript.scroll_y == transcript.max_scroll_y


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


async def test_ctrl_o_opens_and_closes_every_card_and_thought(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    long = "\n".join(f"echoed line {i}" for i in range(30))
    fake_llm.add(
        Reply(
            reasoning="thinking it over",
            tool_calls=[ToolCallSpec(name="echo", arguments={"text": long})],
        )
    )
    fake_llm.add(Reply(text="Done."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "echo a lot")
        card = app.query_one(ToolCard)
        thought = app.query_one(ReasoningView)
        assert "echoed line 29" not in shown(card)
        assert "thinking it over" not in shown(thought)
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert "echoed line 29" in shown(card)
        assert "thinking it over" in shown(thought)
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert "echoed line 29" not in shown(card)
        assert "thinking it over" not in shown(thought)


async def test_a_card_cursor_moves_over_cards_and_enter_opens_one(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    first = "\n".join(f"first line {i}" for i in range(30))
    second = "\n".join(f"second line {i}" for i in range(30))
    fake_llm.add(
        Reply(
            reasoning="thinking it over",
            tool_calls=[ToolCallSpec(name="echo", arguments={"text": first})],
        )
    )
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": second})]))
    fake_llm.add(Reply(text="Done."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "echo twice")
        thought = app.query_one(ReasoningView)
        older, newer = app.query(ToolCard)
        await pilot.press("ctrl+up")  # onto the newest card
        await pilot.pause()
        assert newer.has_class("-cursor")
        assert "Enter opens" in str(app.status_bar.render())
        await pilot.press("enter")  # an empty prompt: Enter opens the card, sends nothing
        await pilot.pause()
        assert "second line 29" in shown(newer)
        assert "first line 29" not in shown(older)
        assert len(fake_llm.requests) == 3
        await pilot.press("alt+up", "ctrl+up", "enter")  # Alt+Up too; onto the thought
        await pilot.pause()
        assert thought.has_class("-cursor")
        assert not newer.has_class("-cursor")
        assert "thinking it over" in shown(thought)
        await pilot.press("ctrl+down", "enter")
        await pilot.pause()
        assert "first line 29" in shown(older)
        await pilot.press("ctrl+down", "ctrl+down")  # past the newest: back to the prompt
        await pilot.pause()
        assert not any(w.has_class("-cursor") for w in (thought, older, newer))
        assert "Enter opens" not in str(app.status_bar.render())
        # Esc leaves the cards too, and Enter sends again.
        await pilot.press("ctrl+up", "escape")
        await pilot.pause()
        assert not newer.has_class("-cursor")
        fake_llm.add(Reply(text="Again."))
        await type_text(app, pilot, "next")
        await pilot.press("enter")
        await until(pilot, lambda: len(fake_llm.requests) == 4, what="the message sent")


async def test_backslash_enter_starts_a_new_line(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from textual import events

    fake_llm.add(Reply(text="ok"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        # Typed in one burst, as a terminal delivers a fast typist's keys.
        for key, char in [*((c, c) for c in "one"), ("backslash", "\\"), ("enter", "\r")]:
            app.post_message(events.Key(key, char))
        for char in "two":
            app.post_message(events.Key(char, char))
        await until(pilot, lambda: app.prompt_area.text == "one\ntwo", what="two lines")
        assert not fake_llm.requests
        await pilot.press("enter")
        await until(pilot, lambda: fake_llm.requests, what="the message sent")
        sent = fake_llm.requests[0].body["messages"][-1]["content"]
        assert "one\ntwo" in str(sent)


async def test_ctrl_r_lists_the_sessions_prompts(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The prompt list Esc Esc opened before Esc Esc became the rewind picker."""
    from dsh.ui.tui.screens.picker import Picker

    fake_llm.add(Reply(text="one done"))
    fake_llm.add(Reply(text="two done"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "first prompt")
        await finish_a_turn(app, pilot, "second prompt")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the prompt list")
        picker = app.screen
        assert isinstance(picker, Picker)
        assert [str(item) for item in picker.items] == ["second prompt", "first prompt"]
        await pilot.press("down", "enter")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert app.prompt_area.text == "first prompt"  # to edit; nothing sent
        assert len(fake_llm.requests) == 2
        # With text typed, Ctrl+R leaves it alone (and says why).
        await pilot.press("ctrl+r")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, Picker)
        assert app.prompt_area.text == "first prompt"


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


async def test_slash_completion_and_help(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await pilot.press("/", "h", "e")
        menu = app.query_one(CompletionMenu)
        await until(pilot, lambda: menu.display, what="the menu")
        labels = [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]
        assert any(label.startswith("/help") for label in labels)
        await pilot.press("enter")  # takes the completion and runs it: one Enter
        await until(pilot, lambda: "Keys:" in screen_text(app), what="the help")
        assert app.prompt_area.text == ""
        await type_text(app, pilot, "/permissions")
        await pilot.press("enter")
        await until(pilot, lambda: "Permission mode:" in screen_text(app), what="the output")
        text = screen_text(app)
        assert text.index("• /permissions") < text.index("Permission mode:")  # echo, output
        assert "/theme" in screen_text(app)
        await pilot.press("/", "c", "o")
        await until(pilot, lambda: menu.display, what="the menu again")
        await pilot.press("tab")  # Tab only completes
        assert app.prompt_area.text.startswith("/co")
        assert app.prompt_area.text.endswith(" ")
        assert not fake_llm.requests


async def test_at_path_completion_is_fuzzy(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "parser_utils.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("hi\n")
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "look at @prsutl")
        app.prompt_area.move_cursor(app.prompt_area.document.end)
        menu = app.query_one(CompletionMenu)
        await until(pilot, lambda: menu.display, what="the menu")
        await pilot.press("tab")
        assert app.prompt_area.text == "look at @src/parser_utils.py "


async def test_prompt_history_is_kept_per_project(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="one"))
    fake_llm.add(Reply(text="two"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        for text in ("first prompt", "second prompt"):
            await finish_a_turn(app, pilot, text)
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await pilot.press("up")
        assert app.prompt_area.text == "second prompt"
        await pilot.press("up")
        assert app.prompt_area.text == "first prompt"
        await pilot.press("down", "down")
        assert app.prompt_area.text == ""


async def test_a_long_paste_collapses_and_is_sent_whole(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="got it"))
    pasted = "\n".join(f"line {i}" for i in range(50))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        from textual import events

        app.prompt_area.post_message(events.Paste(pasted))
        await pilot.pause()
        assert app.prompt_area.text == "[pasted text #1, 50 lines]"
        await pilot.press("enter")
        await until(pilot, lambda: fake_llm.requests, what="the request")
        users = [m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"]
        assert "line 49" in str(users[-1]["content"])


async def test_pastes_go_in_once_in_order_and_are_counted_right(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from textual import events

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        prompt = app.prompt_area  # a paste reaches the app, which hands it to the prompt
        app.post_message(events.Paste("one line"))
        await pilot.pause()
        assert prompt.text == "one line"
        prompt.set_text("")
        three = "alpha line 1\nbeta line 2\ngamma line 3"
        app.post_message(events.Paste(three))
        await pilot.pause()
        assert prompt.text == three
        prompt.set_text("")
        forty = "".join(f"row {i}\n" for i in range(40))  # a final newline, as copied
        app.post_message(events.Paste(forty))
        await pilot.pause()
        assert prompt.text == "[pasted text #1, 40 lines]"
        assert prompt.expanded_text() == forty


async def test_resume_shows_the_session_as_it_was(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "yo"})]))
    fake_llm.add(Reply(text="All **done**."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "go")
        await pilot.press("enter")
        await until(pilot, lambda: "All **done**." in screen_text(app), what="the answer")
        await until(pilot, lambda: app.agent.status == "idle", what="idle")
        session_id = app.agent.id
        live = [type(w).__name__ for w in app.transcript.children]
    async with tui(runtime, tmp_path, home(tmp_path), resume=session_id) as (app, pilot):
        assert app.agent.id == session_id
        text = screen_text(app)
        assert "All **done**." in text
        assert "echo: yo" in text
        resumed = [type(w).__name__ for w in app.transcript.children]
        # the same entries, plus the "resumed" line instead of the welcome line
        assert [n for n in resumed if n != "NoticeView"] == [n for n in live if n != "NoticeView"]


async def test_only_a_window_of_a_long_session_is_mounted(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        from dsh.ui.entries import NoticeEntry, TranscriptFold

        fold = TranscriptFold()
        fold.entries.extend(NoticeEntry(f"n{i}", i, "info", f"notice {i}") for i in range(1000))
        transcript = app.query_one(Transcript)
        await transcript.show(fold)
        await pilot.pause()
        mounted = [w for w in transcript.children if w.id != "more-above"]
        assert len(mounted) == Transcript.OPENING
        assert transcript.first == 1000 - Transcript.OPENING
        assert await transcript.page_up()
        await pilot.pause()
        assert transcript.first == 1000 - Transcript.OPENING - Transcript.PAGE
        assert f"notice {1000 - Transcript.OPENING - Transcript.PAGE}" in screen_text(app)


async def test_copy_and_theme_commands(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no system clipboard tool
    fake_llm.add(Reply(text="Use this:\n\n```sh\nmake test\n```\n"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        copied: list[str] = []
        monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
        await type_text(app, pilot, "how")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: (
                app.agent.status == "idle"
                and any(isinstance(e, AnswerEntry) and e.done for e in app.fold.entries)
            ),
            what="the answer",
        )
        await app.submit("/copy code")
        assert copied == ["make test\n"]
        await app.submit("/copy")
        assert copied[-1].startswith("Use this:")
        await app.submit("/theme dsh-light")
        await pilot.pause()
        assert app.theme == "dsh-light"


async def test_a_mouse_selection_is_copied_on_release_unless_turned_off(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh.ui.tui.transcript_view import UserView

    for copy_on_select in (True, False):
        fake_llm.add(Reply(text="Fine."))
        async with tui(runtime, tmp_path, home(tmp_path), copy_on_select=copy_on_select) as (
            app,
            pilot,
        ):
            copied: list[str] = []
            monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
            await finish_a_turn(app, pilot, "select these words")
            view = app.query_one(UserView)
            # A drag over "select these": press, move, release.
            await pilot.mouse_down(view, offset=(1, 0))
            await pilot.hover(view, offset=(13, 0))
            await pilot.mouse_up(view, offset=(13, 0))
            await until(pilot, lambda: bool(app.screen.get_selected_text()), what="selection")
            await pilot.pause(0.1)
            if copy_on_select:
                assert copied == ["select these"]
                assert app.screen.get_selected_text()  # still shown selected
                # A double click selects (Textual's choice of what) after the release.
                await pilot.double_click(view, offset=(15, 0))
                await until(pilot, lambda: len(copied) == 2, what="the second copy")  # noqa: B023
                assert copied[1] == app.screen.get_selected_text() == "select these words"
            else:
                assert copied == []
                await pilot.press("ctrl+c")  # copies it then
                assert copied == ["select these"]


async def test_the_theme_picker_previews_and_esc_puts_the_theme_back(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.screens.picker import Picker

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        before = app.theme
        names = sorted(app.available_themes)
        await type_text(app, pilot, "/theme")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the theme picker")
        await pilot.press("down")
        moved = names[(names.index(before) + 1) % len(names)]
        await until(pilot, lambda: app.theme == moved, what="the preview")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert app.theme == before
        # Enter keeps the one highlighted.
        await type_text(app, pilot, "/theme")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the theme picker")
        await pilot.press("down", "enter")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert app.theme == moved
        await until(pilot, lambda: f"Theme: {moved}." in screen_text(app))


async def test_the_model_picker_switches_the_model(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.screens.picker import Picker

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        assert app.agent is not None
        assert app.agent.options.model == "deepseek-flash"
        await type_text(app, pilot, "/model")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the model picker")
        picker = app.screen
        assert isinstance(picker, Picker)
        listed = [str(item).split(" · ")[0] for item in picker.items]
        assert "deepseek-v4-pro" in listed
        assert picker.current == listed.index("deepseek-flash")
        steps = listed.index("deepseek-v4-pro") - listed.index("deepseek-flash")
        await pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps), "enter")
        await until(pilot, lambda: app.agent.options.model == "deepseek-v4-pro", what="switch")
        await until(pilot, lambda: "deepseek-v4-pro" in str(app.status_bar.render()))


async def test_ctrl_c_clears_then_quits(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "draft")
        await pilot.press("ctrl+c")
        assert app.prompt_area.text == ""
        await asyncio.sleep(2.1)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running, what="the app to quit")


async def test_new_resume_picker_and_continue(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.screens.sessions import SessionPicker

    fake_llm.add(Reply(text="answer one"))
    fake_llm.add(Reply(text="answer two"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "the first session")
        first = app.agent.id
        await app.submit("/new")
        await until(pilot, lambda: app.agent.id != first, what="a new session")
        assert "answer one" not in screen_text(app)
        await finish_a_turn(app, pilot, "the second session")
        second = app.agent.id
        app.run_worker(app.submit("/resume"))  # the picker, newest first; waits for a pick
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), what="the picker")
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.agent.id == first, what="the first session back")
        assert "answer one" in screen_text(app)
    async with tui(runtime, tmp_path, home(tmp_path), continue_last=True) as (app, pilot):
        assert app.agent.id in (first, second)  # the latest written here
        assert "answer" in screen_text(app)


async def test_resume_without_an_id_opens_the_picker_first(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.app import DshApp, TuiRequest
    from dsh.ui.tui.screens.sessions import SessionPicker

    fake_llm.add(Reply(text="remember me"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "a session to find")
        wanted = app.agent.id
    app = DshApp(TuiRequest(cwd=tmp_path, home=home(tmp_path), pick=True), runtime=runtime)
    async with app.run_test(size=(100, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), what="the picker")
        await pilot.press("enter")
        await until(pilot, lambda: app.ready.is_set(), what="ready")
        assert app.agent.id == wanted
        assert "remember me" in screen_text(app)
        await app.shutdown()
    # Esc in the picker goes back to the shell: no session is started instead.
    sessions_before = await runtime.sessions.persistence.list()
    app = DshApp(TuiRequest(cwd=tmp_path, home=home(tmp_path), pick=True), runtime=runtime)
    async with app.run_test(size=(100, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), what="the picker")
        await pilot.press("escape")
        await until(pilot, lambda: not app.is_running, what="the exit")
    assert app.agent is None
    assert len(await runtime.sessions.persistence.list()) == len(sessions_before)


async def test_shift_enter_alt_enter_and_ctrl_j_each_add_a_line(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The keys the README lists as a new line, where the terminal tells them apart
    (a terminal with the kitty keyboard protocol sends Shift+Enter as its own key)."""
    fake_llm.add(Reply(text="ok"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await pilot.press("a", "shift+enter", "b", "alt+enter", "c", "ctrl+j", "d")
        await until(pilot, lambda: app.prompt_area.text == "a\nb\nc\nd", what="four lines")
        assert not fake_llm.requests
        await pilot.press("enter")
        await until(pilot, lambda: fake_llm.requests, what="the message sent")
        sent = fake_llm.requests[0].body["messages"][-1]["content"]
        assert sent == "a\nb\nc\nd"


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


async def test_a_rewind_takes_the_rewound_turns_off_the_screen(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="The first answer."), Reply(text="The second answer."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "the first question")
        await finish_a_turn(app, pilot, "the second question")
        await until(pilot, lambda: "The second answer." in screen_text(app), what="turn 2")

        prompt = app.agent.rewind(2)

        assert prompt.text() == "the second question"
        await until(
            pilot,
            lambda: "Rewound to before turn 2." in screen_text(app),
            what="the rewind notice",
        )
        text = screen_text(app)
        assert "The first answer." in text
        assert "the second question" not in text
        assert "The second answer." not in text
        assert text.count("Rewound to before turn 2.") == 1
