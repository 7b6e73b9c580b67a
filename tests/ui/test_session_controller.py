"""The session controller against a real runtime and real sessions, through a front end
that writes down what it is asked to show and answers dialogs from a list: what every
front end gets the same way (opening, switching, sending, errors)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import AgentHandle
from dsh.commands import CommandError
from dsh.frontend import Kind
from dsh.hooks import APPROVAL_ASK
from dsh.runtime import Runtime
from dsh.session import SessionBusyError, SessionEvent, turns_of
from dsh.settings import Settings
from dsh.testing import FakeLLM, Reply
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.ui.opening import BusyChoice
from dsh.ui.session_controller import SessionController, StartFailed
from dsh.ui.trusting import TrustAnswer, TrustQuestion
from dsh.ui.user_interface import SessionChoice
from tests.session.turns import complete_turn
from tests.support.waits import HANG_S
from tests.ui.test_busy_session import held_elsewhere


@dataclass
class Recorder:
    """A front end that shows nothing on a screen: it writes down each line and what
    it was asked to show, and answers from ``busy`` and ``picks``."""

    kind: Kind = "plain"
    answers: bool = True
    attended: bool = True  # a None from its choose is a "no"
    one_session: bool = False
    busy: BusyChoice | None = None
    picks: list[str | None] = field(default_factory=list)
    lines: list[tuple[str, str]] = field(default_factory=list)
    shown: list[tuple[str, bool]] = field(default_factory=list)
    """(session id, replayed) for each session attached."""
    read_only: list[SessionEvent] = field(default_factory=list)
    asked_busy: list[str] = field(default_factory=list)

    def said(self, level: str) -> list[str]:
        return [text for shown, text in self.lines if shown == level]

    def show(self, text: str, *, level: str = "info") -> None:
        self.lines.append((level, text))

    def show_ignored(self, settings: Settings) -> None:
        self.lines.extend(("warning", item.key) for item in settings.ignored)

    def show_warning(self, text: str) -> None:
        self.lines.append(("start-up", text))

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        self.shown.append((agent.id, replay))

    def detach(self) -> None:
        self.lines.append(("detached", ""))

    async def show_read_only(self, events: Sequence[SessionEvent]) -> None:
        self.read_only = list(events)

    async def quit(self) -> None:
        self.lines.append(("quit", ""))

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        return "later"

    async def set_up(self, home: Path, settings: Settings) -> bool | None:
        return None

    async def ask_busy(self, busy: SessionBusyError) -> BusyChoice | None:
        self.asked_busy.append(str(busy))
        return self.busy

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(outcome="deny")

    async def ask_questions(self, questions: Sequence[Question]) -> list[Answer] | None:
        return None

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        return PlanDecision(outcome="keep-planning")

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        return None

    async def pick_session(self) -> str | None:
        return self.picks.pop(0) if self.picks else None


async def started(
    runtime: Runtime, tmp_path: Path, ui: Recorder, **choice: Any
) -> SessionController:
    controller = SessionController(ui, SessionChoice(cwd=tmp_path, **choice), runtime=runtime)
    await controller.start()
    return controller


async def test_nothing_to_continue_fails_or_starts_anew(runtime: Runtime, tmp_path: Path) -> None:
    ui = Recorder()
    controller = await started(runtime, tmp_path, ui, continue_last=True)
    with pytest.raises(StartFailed) as failed:
        await controller.open_first()
    assert str(failed.value) == f"dsh: no earlier session in {tmp_path.resolve()} to continue"
    assert controller.agent is None
    assert await controller.open_first(new_if_none=True)
    assert ui.said("warning") == [
        f"No earlier session in {tmp_path.resolve()} to continue. Starting a new one."
    ]
    assert controller.agent is not None
    assert ui.shown == [(controller.agent.id, False)]
    await controller.close()


async def test_a_session_that_cannot_be_opened_is_one_line(
    runtime: Runtime, tmp_path: Path
) -> None:
    controller = await started(runtime, tmp_path, Recorder(), resume="no-such-session")
    with pytest.raises(StartFailed) as failed:
        await controller.open_first()
    assert str(failed.value).startswith("dsh: ")
    assert "no-such-session" in str(failed.value)
    await controller.close()


async def test_a_busy_session_declined_fails_and_read_sends_nothing(
    runtime: Runtime, tmp_path: Path
) -> None:
    session_id, other = await held_elsewhere(runtime, tmp_path / "home")
    try:
        ui = Recorder(busy=None)
        controller = await started(runtime, tmp_path, ui, resume=session_id)
        with pytest.raises(StartFailed) as failed:
            await controller.open_first()
        assert f"pid {os.getpid()}" in str(failed.value)
        assert ui.asked_busy == [str(failed.value).removeprefix("dsh: ")]
        await controller.close()

        ui = Recorder(busy="read")
        controller = await started(runtime, tmp_path, ui, resume=session_id)
        assert await controller.open_first()
        assert controller.agent is None
        assert "turn/end" in [event.type for event in ui.read_only]
        assert not await controller.submit("hello")
        assert not await controller.submit("/status")
        assert [text.split(":")[0] for text in ui.said("warning")] == ["Nothing is sent"] * 2
        await controller.close()
    finally:
        other.release_all()


async def test_resume_of_a_busy_session_reports_it_and_opens_a_new_one(
    runtime: Runtime, tmp_path: Path
) -> None:
    """/resume of a session another dsh writes once left the UI with no session."""
    session_id, other = await held_elsewhere(runtime, tmp_path / "home")
    try:
        ui = Recorder()
        controller = await started(runtime, tmp_path, ui)
        assert await controller.open_first()
        first = controller.agent
        assert first is not None
        await controller.open_session(session_id[:8])
        [error] = ui.said("error")
        assert error.startswith(f"Could not resume {session_id}: ")
        assert controller.agent is not None
        assert controller.agent.id not in (first.id, session_id)
        assert [replayed for _, replayed in ui.shown] == [False, False]
        await controller.close()
    finally:
        other.release_all()


async def test_resume_picks_switches_and_says_when_it_is_on_screen(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    store = runtime.sessions
    earlier = await store.create(str(tmp_path.resolve()))
    complete_turn(earlier, "the question", "the answer", with_tool=False)
    await store.close(earlier)
    ui = Recorder(picks=[earlier.id, None])
    controller = await started(runtime, tmp_path, ui)
    controller.add_session_commands("", lambda: None)
    assert await controller.open_first()
    await controller.submit("/resume")  # picked: the earlier session
    assert controller.agent is not None
    assert controller.agent.id == earlier.id
    assert ui.shown[-1] == (earlier.id, True)
    await controller.submit("/resume")  # nothing picked: nothing changes
    await controller.open_session(earlier.id[:6])
    assert ui.said("info")[-1] == "That is the session on screen."
    assert len(ui.shown) == 2
    await controller.close()


async def test_what_is_sent(runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="an answer"))
    ui = Recorder()
    controller = await started(runtime, tmp_path, ui)
    controller.add_session_commands("keys here", lambda: None)
    assert await controller.open_first()
    assert not await controller.submit("   ")
    assert not await controller.submit("/nope")
    assert ui.said("error") == ["Unknown command /nope (/help lists them)."]
    assert not await controller.submit("/help")
    help_text = ui.said("info")[-1]
    assert help_text.startswith("Commands:")
    assert help_text.endswith("keys here")
    assert "/resume [id]" in help_text
    assert await controller.submit("hello")
    agent = controller.agent
    assert agent is not None
    await agent.when_idle()
    assert fake_llm.chat_requests[-1].body["messages"][-1]["content"] == "hello"
    await controller.submit("/quit")
    assert ("quit", "") in ui.lines
    await controller.close()
    assert controller.agent is None
    assert controller.resumable == agent.id  # something was said in it


async def test_a_front_end_of_one_session_refuses_switching(
    runtime: Runtime, tmp_path: Path
) -> None:
    ui = Recorder(kind="headless", answers=False, one_session=True)
    controller = await started(runtime, tmp_path, ui)
    assert await controller.open_first()
    with pytest.raises(CommandError):
        await controller.new_session()
    with pytest.raises(CommandError):
        await controller.open_session(None)
    assert runtime.root.listener_count(APPROVAL_ASK) == 0  # nobody answers: none wired
    await controller.close()


async def test_a_second_close_returns_once_the_first_is_done(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The TUI closes on quit and again as it unmounts: the second close must not let
    the process go on (and remove the demo's folder) while the first still closes."""
    fake_llm.add(Reply(text=" ".join(["word"] * 200), chunk_size=4, chunk_delay_ms=25))
    controller = await started(runtime, tmp_path, Recorder())
    assert await controller.open_first()
    agent = controller.agent
    assert agent is not None
    assert await controller.submit("a long answer, please")
    assert agent.status != "idle"
    # The turn has begun (on a loaded machine the prompt may still wait to be claimed,
    # and a close then discards it, logging no turn/end to look for).
    for _ in range(int(HANG_S / 0.01)):
        if any(e.type == "turn/start" for e in agent.session.events):
            break
        await asyncio.sleep(0.01)
    first = asyncio.ensure_future(controller.close())  # cancels the turn, waits for its end
    await asyncio.sleep(0)
    await controller.close()
    assert runtime.agents.list() == []
    assert agent.session.events[-1].type == "turn/end"
    await first


async def test_fork_opens_a_new_session_from_a_turn_and_keeps_the_original(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    ui = Recorder()
    controller = await started(runtime, tmp_path, ui)
    controller.add_session_commands("", lambda: None)
    assert await controller.open_first()
    for prompt in ("first", "second"):
        assert await controller.submit(prompt)
        assert controller.agent is not None
        await asyncio.wait_for(controller.agent.when_idle(), HANG_S)
    original = controller.agent
    assert original is not None

    assert not await controller.submit("/fork two")
    assert ui.said("error")[-1] == "/fork takes a turn number, as in /fork 2 (not 'two')"
    assert not await controller.submit("/fork 5")
    assert ui.said("error")[-1].endswith("there is no turn 5; the turns are 1-2")
    assert controller.agent is original  # nothing changed

    assert not await controller.submit("/fork 1")
    forked = controller.agent
    assert forked is not None
    assert forked.id != original.id
    assert ui.shown[-1] == (forked.id, True)
    assert ui.said("info")[-1].startswith(f"Forked session {original.id[:8]} at turn 1: ")
    assert forked.session.header.parent_session == original.id
    assert [m.text() for m in forked.session.derive_messages()][-2:] == ["first", "one"]
    assert await controller.submit("third")
    await asyncio.wait_for(forked.when_idle(), HANG_S)
    sent = [m["content"] for m in fake_llm.chat_requests[-1].body["messages"]]
    assert sent[-3:] == ["first", "one", "third"]
    assert "second" not in sent
    # The original still holds both turns.
    reread = await runtime.sessions.persistence.inspect(original.id)
    assert [t.prompt for t in turns_of(reread.events)] == ["first", "second"]
    await controller.close()
