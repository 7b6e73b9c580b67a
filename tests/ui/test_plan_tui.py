"""Plan mode in the TUI under Pilot: the plan dialog and its three answers, the status
bar following the permission mode, with a real runtime and the scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.plan_review import PlanDecision
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.screens.plan import PlanScreen
from dsh.ui.tui.transcript_view import ToolCard
from tests.ui.test_attention import blur, notifications
from tests.ui.tui_support import screen_text, shown, tui, type_text, until

PLAN = """# Add a greeting

1. Create `greet.py` with a `greet(name)` function.
2. Call it from `main.py`.

Risks: none; nothing else imports `main.py`.
"""


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def status(app: DshApp) -> str:
    return str(app.status_bar.render())


async def reviewing(
    app: DshApp, pilot: Pilot[Any], plan: str = PLAN, signal: asyncio.Event | None = None
) -> tuple[asyncio.Task[PlanDecision], PlanScreen]:
    """The plan reviewed as the plan tool asks for it (the approvals service, the
    session on screen), and its dialog once open and taking keys."""
    assert app.runtime is not None
    assert app.agent is not None
    approvals = app.runtime.root.get(APPROVALS)
    review = asyncio.create_task(
        approvals.review_plan(plan, session=app.agent.session, call_id="call-1", signal=signal)
    )
    await until(pilot, lambda: isinstance(app.screen, PlanScreen), what="the plan dialog")
    dialog = app.screen
    assert isinstance(dialog, PlanScreen)
    dialog.guard.seconds = 0  # read: no key typed for the prompt is in flight
    await pilot.pause()
    return review, dialog


def reviewed(app: DshApp) -> list[Any]:
    assert app.agent is not None
    return [e.data for e in app.agent.session.events if e.type == "plan/reviewed"]


async def test_approving_a_plan_with_accept_edits_changes_the_mode_shown(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await until(pilot, lambda: "⏵ plan" in status(app), what="plan on the status bar")
        review, dialog = await reviewing(app, pilot)
        body = shown(dialog.query_one("#plan-body", Static))
        # The whole plan, as Markdown (the heading's # and the code's backticks are
        # markup, not text).
        assert "Add a greeting" in body
        assert "# Add a greeting" not in body
        assert "Create greet.py with a greet(name) function." in body
        assert "Risks: none" in body
        labels = [str(button.label) for button in dialog.query("#buttons Button")]
        assert labels == ["1 Approve, accept edits", "2 Approve, ask as usual", "3 Keep planning"]
        assert "waiting for you" in status(app)
        await pilot.press("1")
        decision = await asyncio.wait_for(review, 10)
        assert decision == PlanDecision(outcome="accept-edits")
        assert not isinstance(app.screen, PlanScreen)
        await until(pilot, lambda: "⏵ accept-edits" in status(app), what="the new mode")
        assert "waiting for you" not in status(app)
        assert [(r.outcome, r.mode) for r in reviewed(app)] == [("accept-edits", "accept-edits")]


async def test_approving_a_plan_to_ask_as_usual_leaves_plan_mode(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, _ = await reviewing(app, pilot)
        await pilot.press("2")
        assert await asyncio.wait_for(review, 10) == PlanDecision(outcome="default")
        await until(pilot, lambda: "⏵" not in status(app), what="default mode (not shown)")
        assert runtime.root.get(APPROVALS).mode == "default"


async def test_keep_planning_sends_the_typed_note_and_stays_in_plan_mode(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, dialog = await reviewing(app, pilot)
        await pilot.press("3")
        note = dialog.query_one("#note-input", Input)
        assert note.has_focus
        # Digits typed in the note are the note's, not answers.
        await pilot.press(*"use 2 files")
        assert not review.done()
        assert note.value == "use 2 files"
        await pilot.press("escape")  # back to the choices, the note dropped
        assert app.screen is dialog
        assert not dialog.in_note
        assert note.value == ""
        await pilot.press("3", *"split main.py first", "enter")
        decision = await asyncio.wait_for(review, 10)
        assert decision == PlanDecision(outcome="keep-planning", note="split main.py first")
        assert runtime.root.get(APPROVALS).mode == "plan"
        assert "⏵ plan" in status(app)
        assert [(r.outcome, r.note, r.mode) for r in reviewed(app)] == [
            ("keep-planning", "split main.py first", None)
        ]


async def test_escape_and_an_empty_note_keep_planning_without_a_note(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, _ = await reviewing(app, pilot)
        await pilot.press("escape")
        assert await asyncio.wait_for(review, 10) == PlanDecision(outcome="keep-planning")
        review, _ = await reviewing(app, pilot)
        await pilot.click("#choice-keep-planning")
        await pilot.press("enter")
        assert await asyncio.wait_for(review, 10) == PlanDecision(outcome="keep-planning")
        assert runtime.root.get(APPROVALS).mode == "plan"


async def test_a_button_approves_the_plan(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, _ = await reviewing(app, pilot)
        await pilot.click("#choice-accept-edits")
        assert await asyncio.wait_for(review, 10) == PlanDecision(outcome="accept-edits")


async def test_keys_typed_for_the_prompt_do_not_answer_the_plan(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, dialog = await reviewing(app, pilot)
        dialog.guard.seconds = 30  # as if the person were typing when it opened
        await pilot.press("x", "1", "3")
        await until(pilot, lambda: app.prompt_area.text == "x13", what="the typing kept")
        assert app.screen is dialog
        assert not review.done()
        dialog.guard.seconds = 0
        await pilot.press("2")
        assert (await asyncio.wait_for(review, 10)).outcome == "default"


async def test_a_long_plan_is_shown_whole_and_scrolls(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    steps = "\n".join(f"{n}. Step number {n} of the plan." for n in range(1, 81))
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, dialog = await reviewing(app, pilot, f"# A long plan\n\n{steps}\n")
        body = shown(dialog.query_one("#plan-body", Static))
        assert "Step number 1 of" in body
        assert "Step number 80 of" in body
        scroller = dialog.query_one("#plan")
        assert scroller.has_focus
        assert scroller.max_scroll_y > 0
        await pilot.press("end")
        await until(pilot, lambda: scroller.scroll_y == scroller.max_scroll_y, what="scrolled")
        # The answers stay on screen below the scrolled plan.
        assert dialog.query_one("#buttons").region.bottom <= app.size.height
        await pilot.press("1")
        assert (await asyncio.wait_for(review, 10)).outcome == "accept-edits"


async def test_the_plan_is_shown_safe_from_control_sequences(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    hostile = "# Plan\x1b]0;pwned\x07\n\nRun \x1b]52;c;ZXZpbA==\x07 then \u202estop\n"
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        review, dialog = await reviewing(app, pilot, hostile)
        body = shown(dialog.query_one("#plan-body", Static))
        assert "␛]52;c;ZXZpbA==␇" in body
        assert "<U+202E>stop" in body
        assert not any(c in body for c in "\x1b\x07\u202e")
        await pilot.press("escape")
        await asyncio.wait_for(review, 10)


async def test_a_cancelled_turn_takes_the_plan_dialog_away(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        cancelled = asyncio.Event()
        review, dialog = await reviewing(app, pilot, signal=cancelled)
        cancelled.set()
        decision = await asyncio.wait_for(review, 10)
        assert decision.outcome == "cancelled"
        await until(pilot, lambda: app.screen is not dialog, what="the dialog taken away")
        assert not any(isinstance(screen, PlanScreen) for screen in app.screen_stack)
        assert "waiting for you" not in status(app)
        assert runtime.root.get(APPROVALS).mode == "plan"
        # The prompt takes keys again.
        await type_text(app, pilot, "next")
        await pilot.press("!")
        assert app.prompt_area.text.startswith("next")


async def test_the_status_bar_follows_every_change_of_mode(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    approvals = runtime.root.get(APPROVALS)
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        assert "⏵" not in status(app)
        # Changed outside any command or session event (an approved plan, an editor's
        # mode picker): shown at once.
        approvals.mode = "plan"
        await until(pilot, lambda: "⏵ plan" in status(app), what="plan shown")
        approvals.mode = "bypass"
        await until(pilot, lambda: "⏵ bypass" in status(app), what="bypass shown")
        await type_text(app, pilot, "/permissions accept-edits")
        await pilot.press("enter")
        await until(pilot, lambda: "⏵ accept-edits" in status(app), what="/permissions")
        await pilot.press("shift+tab")  # accept-edits → plan
        await until(pilot, lambda: "⏵ plan" in status(app), what="Shift+Tab to plan")
        assert approvals.mode == "plan"
        await pilot.press("shift+tab")  # plan → default
        await until(pilot, lambda: "⏵" not in status(app), what="Shift+Tab to default")
        assert approvals.mode == "default"


async def test_a_waiting_plan_notifies_while_the_terminal_is_elsewhere(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TMUX", "STY"):  # not wrapped for the tmux these tests may run in
        monkeypatch.delenv(name, raising=False)
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path), notify="osc9") as (app, pilot):
        driver = app._driver
        assert driver is not None
        written: list[str] = []
        write = driver.write

        def capture(data: str) -> None:
            written.append(data)
            write(data)

        driver.write = capture  # type: ignore[method-assign]
        await blur(app, pilot)
        review, _ = await reviewing(app, pilot)
        assert notifications(written) == ["\x1b]9;dsh: a plan waits for your approval\x07"]
        await pilot.press("1")
        await asyncio.wait_for(review, 10)


def present(plan: str = PLAN) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="exit_plan_mode", arguments={"plan": plan})])


async def test_ctrl_c_cancels_the_turn_and_takes_the_plan_dialog_away(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(present())
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "plan a greeting")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PlanScreen), what="the plan dialog")
        dialog = app.screen
        await pilot.press("ctrl+c")
        await until(
            pilot,
            lambda: app.agent is not None and app.agent.status == "idle",
            what="the turn cancelled",
        )
        await until(pilot, lambda: app.screen is not dialog, what="the dialog taken away")
        assert not any(isinstance(screen, PlanScreen) for screen in app.screen_stack)
        assert [r.outcome for r in reviewed(app)] == ["cancelled"]
        assert runtime.root.get(APPROVALS).mode == "plan"
        card = app.query_one(ToolCard)
        await until(pilot, lambda: "Plan not reviewed" in shown(card), what="the card")
        assert "the turn was cancelled" in shown(card)
        assert "waiting for you" not in status(app)


async def test_the_plan_card_shows_the_plan_and_its_outcome(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    steps = "\n".join(f"{n}. Step number {n} of the plan." for n in range(1, 41))
    fake_llm.add(present(f"# A long plan\n\n{steps}\n"), Reply(text="Carrying it out."))
    runtime.root.get(APPROVALS).mode = "plan"
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "plan it")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PlanScreen), what="the plan dialog")
        dialog = app.screen
        assert isinstance(dialog, PlanScreen)
        dialog.guard.seconds = 0
        await pilot.press("2")
        await until(pilot, lambda: "Carrying it out." in screen_text(app), what="the answer")
        card = app.query_one(ToolCard)
        await until(pilot, lambda: "Plan approved" in shown(card), what="the card's outcome")
        collapsed = shown(card)
        assert "exit_plan_mode # A long plan…" in collapsed  # its header: the first line
        assert "Plan approved · default" in collapsed
        assert "Step number 1 of" in collapsed
        assert "Step number 40 of" not in collapsed
        assert "more" in collapsed
        await pilot.press("ctrl+o")  # every card opened in full
        await until(pilot, lambda: "Step number 40 of" in shown(card), what="the card opened")
        expanded = shown(card)
        assert "Step number 40 of" in expanded
        assert "# A long plan" not in expanded.split("\n", 1)[1]  # Markdown, not its source
        assert "⏵" not in status(app)


async def test_slash_plan_shows_plan_mode_on_the_status_bar(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "/plan")
        await pilot.press("enter")
        await until(pilot, lambda: "⏵ plan" in status(app), what="/plan on the status bar")
        assert runtime.root.get(APPROVALS).mode == "plan"
