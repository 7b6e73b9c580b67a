"""The TUI's transcript under Pilot: scrolling it, opening cards and thoughts, a
resumed or long session on screen, and a rewind taking turns off it.
"""

from __future__ import annotations

from pathlib import Path

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.tui.transcript_view import ReasoningView, ToolCard, Transcript
from tests.ui.tui_support import (
    finish_a_turn,
    home,
    screen_text,
    shown,
    tui,
    type_text,
    until,
)


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
