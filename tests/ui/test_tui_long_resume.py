"""A long session resumed in the TUI: it opens with its last turns, read through its
snapshot, and scrolling up (Home, again and again, as a person would) folds the older
turns in from the log until its very first message is on screen."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh.llm import AssistantMessage, ModelSource, TextBlock, TextDelta, user_text
from dsh.runtime import Runtime
from dsh.session.events import SessionEvent, is_surface_type
from dsh.session.header import SessionHeader
from dsh.session.payloads import (
    AssistantChunk,
    AssistantMessageData,
    InboxClaimed,
    InboxEnqueued,
    PromptTrigger,
    StepEnd,
    StepStart,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
from dsh.session.store import SessionStore
from dsh.testing import FakeLLM
from dsh.ui.tui.transcript_view import Transcript, UserView
from tests.support.waits import HANG_S
from tests.ui.tui_support import screen_text, tui

TURNS = 50
CHUNKS = 2_000  # streamed pieces a turn: 50 turns make a log of 100,000 events and more


def a_long_log(header: SessionHeader) -> list[SessionEvent]:
    """``TURNS`` turns, each a prompt and an answer streamed in ``CHUNKS`` pieces."""
    events: list[SessionEvent] = []
    stamp = header.created_at

    def add(type_: str, data: object) -> None:
        nonlocal stamp
        stamp += 10
        surface = "append" if is_surface_type(type_) else None
        events.append(SessionEvent(type_, len(events), stamp, data, None, surface, None))

    for turn in range(1, TURNS + 1):
        prompt = user_text(f"question number {turn}")
        item = f"item-{turn}"
        add("inbox/enqueued", InboxEnqueued(item_id=item, message=prompt, placement="queued"))
        add("inbox/claimed", InboxClaimed(item_ids=(item,)))
        add("turn/start", TurnStart(turn=turn, trigger=PromptTrigger()))
        add("step/start", StepStart(turn=turn, step=1))
        add("user/message", prompt)
        pieces = [f"w{turn}.{k} " for k in range(CHUNKS)]
        for piece in pieces:
            chunk = TextDelta(index=0, text=piece)
            add("assistant/chunk", AssistantChunk(turn=turn, step=1, chunk=chunk))
        answer = AssistantMessage(
            content=(TextBlock(text="".join(pieces)),),
            source=ModelSource(provider="deepseek", model="deepseek-flash"),
        )
        add("assistant/message", AssistantMessageData(turn=turn, step=1, message=answer))
        add("step/end", StepEnd(turn=turn, step=1))
        add("turn/end", TurnEnd(turn=turn, reason=TurnCompleted()))
    return events


async def stored_long_session(home: Path, cwd: Path) -> str:
    """The log written as dsh writes it, then opened and closed once (as a person
    leaves a session): which writes its snapshot."""
    store = SessionStore.at(home)
    header = SessionHeader(id="long-session", created_at=1_780_000_000_000, cwd=str(cwd))
    await store.persistence.create(header)
    events = a_long_log(header)
    for start in range(0, len(events), 5_000):
        await store.persistence.append(header.id, events[start : start + 5_000], sync=False)
    session = await store.open(header.id)
    await store.close(session)
    await store.aclose()
    return header.id


async def test_a_resumed_100k_event_session_scrolls_back_to_its_first_message(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    session_id = await stored_long_session(home, tmp_path)
    async with tui(runtime, tmp_path, home, resume=session_id) as (app, pilot):
        assert app.agent is not None
        session = app.agent.session
        assert len(session.events) > 100_000
        assert session.reads_lazily  # through the snapshot: the older events in the file
        fold = app.fold
        assert fold is not None
        assert fold.older is not None  # it opened with its last turns only
        text = screen_text(app)
        assert f"question number {TURNS}" in text
        assert "question number 1\n" not in text
        transcript = app.query_one(Transcript)

        def first_shown() -> bool:
            """The first prompt's view is in the transcript's visible part."""
            for view in transcript.query(UserView):
                if view.entry.text == "question number 1":
                    top = view.virtual_region.y
                    return transcript.scroll_y <= top < transcript.scroll_y + transcript.size.height
            return False

        async def scroll_back() -> None:
            while not first_shown():
                await pilot.press("home")
                await pilot.pause()

        await asyncio.wait_for(scroll_back(), HANG_S * 4)
        assert fold.older is None or not fold.older()  # every turn folded in
        prompts = [e.text for e in fold.entries if type(e).__name__ == "UserEntry"]
        assert prompts == [f"question number {n}" for n in range(1, TURNS + 1)]
