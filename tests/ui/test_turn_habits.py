"""Habits people bring from other agents (issue 36, item 8), in the real TUI against
the scripted server: Esc in an approval stops the turn, the model is told it was
interrupted, steering pending at Esc comes back to the prompt, a retry says so in
the status bar."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.screens.approval import ApprovalScreen
from tests.ui.tui_support import screen_text, send_until_approval, shown, tui, type_text, until

SHOUT = ToolCallSpec(name="shout", arguments={"text": "hey"})


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def messages(request: Any) -> list[dict[str, Any]]:
    return list(request.body["messages"])


def texts(request: Any, role: str) -> list[str]:
    return [m["content"] for m in messages(request) if m["role"] == role]


def idle(app: DshApp) -> bool:
    return app.agent is not None and app.agent.status == "idle"


async def test_esc_in_the_approval_stops_the_turn_and_the_model_is_told(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="I will shout.", tool_calls=[SHOUT]))
    fake_llm.add(Reply(text="Fine, no shouting."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        dialog = await send_until_approval(app, pilot, "shout hey")
        assert "Esc stops the turn" in shown(dialog.query_one("#stop-hint"))
        dialog.guard.seconds = 0  # the person has read it (no typing run to tell apart)
        await pilot.press("escape")
        await until(pilot, lambda: idle(app), what="the turn to stop")
        await until(pilot, lambda: not isinstance(app.screen, ApprovalScreen), what="no dialog")
        assert "turn 1 · cancelled" in screen_text(app)
        # Stopped: the turn did not go on to ask the model again.
        assert len(fake_llm.chat_requests) == 1
        agent = app.agent
        assert agent is not None
        [end] = [e.data for e in agent.session.events if e.type == "turn/end"]
        assert end.reason.kind == "aborted"

        await type_text(app, pilot, "what now?")
        await pilot.press("enter")
        await until(pilot, lambda: len(fake_llm.chat_requests) == 2, what="the next request")
        sent = fake_llm.chat_requests[1]
        # Every call answered (the wire needs it), saying it did not run...
        [result] = texts(sent, "tool")
        assert "cancel" in result.lower()
        # ...and the model told the user interrupted, before the new prompt.
        users = texts(sent, "user")
        assert users[-1] == "what now?"
        note = users[-2]
        assert "The user interrupted this turn" in note
        assert "Not run: shout" in note
        await until(pilot, lambda: "Fine, no shouting." in screen_text(app), what="the answer")


async def test_n_in_the_approval_denies_and_the_turn_goes_on(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(tool_calls=[SHOUT]))
    fake_llm.add(Reply(text="Understood, no shouting."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        dialog = await send_until_approval(app, pilot, "shout hey")
        dialog.guard.seconds = 0
        await pilot.press("n")
        await until(pilot, lambda: "Understood, no shouting." in screen_text(app), what="answer")
        assert "turn 1 · completed" in screen_text(app)
        [result] = texts(fake_llm.chat_requests[1], "tool")
        assert "not allowed" in result or "denied" in result
        assert not any("interrupted" in u for u in texts(fake_llm.chat_requests[1], "user"))


async def test_steering_and_queued_messages_pending_at_esc_come_back_to_the_prompt(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Working on it.", gate="slow"))
    fake_llm.add(Reply(text="Here is the next answer."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: len(fake_llm.chat_requests) == 1, what="the request")
        await type_text(app, pilot, "also check the tests")
        await pilot.press("enter")  # steers the running turn
        await type_text(app, pilot, "then commit")
        await pilot.press("tab")  # queued after it
        await until(pilot, lambda: app.fold is not None and len(app.fold.queued) == 2)
        await type_text(app, pilot, "half typed")
        await pilot.press("escape")
        await until(pilot, lambda: idle(app), what="the turn to stop")
        assert app.prompt_area.text == "also check the tests\n\nthen commit\n\nhalf typed"
        assert app.fold is not None
        assert not app.fold.queued
        fake_llm.open_gate("slow")
        # Nothing was sent later by surprise: the next request is the person's.
        await pilot.pause(0.2)
        assert len(fake_llm.chat_requests) == 1
        await pilot.press("enter")
        await until(pilot, lambda: len(fake_llm.chat_requests) == 2, what="the next request")
        users = texts(fake_llm.chat_requests[1], "user")
        assert users[-1] == "also check the tests\n\nthen commit\n\nhalf typed"
        assert "The user interrupted this turn" in users[-2]
        assert "before your answer arrived" in users[-2]
        assert users.count("start") == 1


async def test_a_retry_shows_as_a_retry_in_the_status_bar(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(fault=Fault(status=429, retry_after=2)))
    fake_llm.add(Reply(text="Through at last."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "hello")
        await pilot.press("enter")
        wanted = re.compile(r"retrying in [12] s \(1/\d\): 429 rate limited")
        await until(
            pilot,
            lambda: wanted.search(str(app.status_bar.render())) is not None,
            what="the retry in the status bar",
        )
        assert "thinking" not in str(app.status_bar.render())
        await until(pilot, lambda: "Through at last." in screen_text(app), what="the answer")
        await until(pilot, lambda: idle(app), what="the turn")
        assert "retrying" not in str(app.status_bar.render())
        assert len(fake_llm.chat_requests) == 2


async def test_an_answer_cut_mid_stream_is_continued_and_what_arrived_stays(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    first = "The first half of the answer arrives, and then"
    fake_llm.add(Reply(text=first, chunk_size=8, cut_after=3))  # the connection drops
    fake_llm.add(Reply(text="the second half follows."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "explain")
        await pilot.press("enter")
        await until(pilot, lambda: "the second half follows." in screen_text(app), what="more")
        await until(pilot, lambda: idle(app), what="the turn")
        text = screen_text(app)
        arrived = first[:16]  # three events of eight characters, less the role-only one
        assert arrived in text  # what arrived before the cut stays on screen
        assert "turn 1 · completed" in text
        assert "The connection dropped while your answer was streaming" in text  # said
        assert len(fake_llm.chat_requests) == 2
        sent = messages(fake_llm.chat_requests[1])
        partial, note = sent[-2], sent[-1]
        assert partial["role"] == "assistant"
        assert partial["content"].startswith(arrived)
        assert note["role"] == "user"
        assert "cut off where it ends above" in note["content"]
        assert "Continue from exactly that point" in note["content"]
        assert "explain" in texts(fake_llm.chat_requests[1], "user")
