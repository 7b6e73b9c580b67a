"""``!command`` at the prompt: the real app runs it through the shell tool's path (its
permissions), shows its card, and the model reads the command and its output with the
next prompt (the scripted server's requests say what it read)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prompt_toolkit.input import PipeInput

from dsh.llm import ShellSource, UserMessage
from dsh.policy.permissions import parse_rules
from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.session import check_log
from dsh.testing import FakeLLM, Reply
from dsh.testing.reconstruct import check_requests
from dsh.ui.entries import ToolEntry, TranscriptFold
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.transcript_view import NoticeView, ToolCard
from dsh_plugins._shared.chat_completions import ChatModel, request_body
from dsh_plugins.llm_deepseek import DEFAULT_MODELS
from tests.ui.plain_support import Plain
from tests.ui.tui_support import finish_a_turn, shown, tui, type_text, until


def request_text(request: Any) -> str:
    """Every message of a request the scripted server received, as one text."""
    return json.dumps(request.body["messages"], ensure_ascii=False)


def notices(app: DshApp) -> str:
    return " ".join(shown(notice) for notice in app.query(NoticeView))


async def test_a_bang_command_runs_shows_a_card_and_reaches_the_next_request(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="I see the file was made."))
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "!touch made.txt && echo hello-from-shell")
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCard)), what="the command's card")
        card = app.query_one(ToolCard)
        await until(pilot, lambda: "hello-from-shell" in shown(card), what="its output")
        assert (tmp_path / "made.txt").exists()  # it really ran, in the project
        assert not isinstance(app.screen, ApprovalScreen)  # typed by the person: not asked
        assert "touch made.txt" in shown(card)
        assert fake_llm.chat_requests == []  # no turn: the model is not asked yet

        await finish_a_turn(app, pilot, "what did it print?")
        [request] = fake_llm.chat_requests
        sent = request_text(request)
        assert "$ touch made.txt && echo hello-from-shell" in sent
        assert "hello-from-shell\\n" in sent  # its output, as the shell tool reports it
        assert sent.index("hello-from-shell\\n") < sent.index("what did it print?")

        # The log holds it as one user/message: a resumed session shows the same card.
        agent = app.agent
        assert agent is not None
        logged = [
            e.data
            for e in agent.session.events
            if isinstance(e.data, UserMessage) and isinstance(e.data.source, ShellSource)
        ]
        assert len(logged) == 1
        fold = TranscriptFold()
        for event in agent.session.events:
            fold.apply(event)
        [entry] = [e for e in fold.entries if isinstance(e, ToolEntry)]
        assert entry.status == "done"
        assert entry.result is not None
        assert "hello-from-shell" in entry.result
        # And the request the server got is rebuilt from the log alone.
        assert check_log(agent.session.events) == []
        check_requests(
            agent.session.events,
            [r.body for r in fake_llm.chat_requests],
            lambda o: request_body(o, DEFAULT_MODELS.get(o.model, ChatModel())),
        )


async def test_a_denied_bang_command_does_not_run(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).deny.extend(parse_rules("bash(touch:*)"))
    fake_llm.add(Reply(text="Noted."))
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "!touch denied.txt")
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCard)), what="the command's card")
        card = app.query_one(ToolCard)
        entry = card.entry
        assert isinstance(entry, ToolEntry)
        await until(pilot, lambda: entry.status == "denied", what="the denial")
        assert not (tmp_path / "denied.txt").exists()
        assert "bash(touch:*)" in shown(card)
        # The model hears that it was refused, with the next prompt.
        await finish_a_turn(app, pilot, "why not?")
        sent = request_text(fake_llm.chat_requests[-1])
        assert "$ touch denied.txt" in sent
        assert "bash(touch:*)" in sent


async def test_a_bang_command_the_rules_ask_about_still_asks(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / ".dsh").mkdir()
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        # A write into the project's .dsh folder asks whoever runs it, allow rules or not.
        await type_text(app, pilot, "!echo x > .dsh/made.txt")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the dialog")
        dialog = app.screen
        assert isinstance(dialog, ApprovalScreen)
        dialog.guard.seconds = 0
        await pilot.press("n")
        await until(pilot, lambda: bool(app.query(ToolCard)), what="the command's card")
        entry = app.query_one(ToolCard).entry
        assert isinstance(entry, ToolEntry)
        assert entry.status == "denied"
        assert not (tmp_path / ".dsh" / "made.txt").exists()


async def test_escape_stops_a_running_bang_command(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "!touch started.txt && sleep 60 && touch finished.txt")
        await pilot.press("enter")
        await until(pilot, lambda: (tmp_path / "started.txt").exists(), what="the command")
        await pilot.press("escape")
        await until(pilot, lambda: bool(app.query(ToolCard)), what="the command's card")
        entry = app.query_one(ToolCard).entry
        assert isinstance(entry, ToolEntry)
        assert entry.status == "cancelled"
        assert not (tmp_path / "finished.txt").exists()
        assert app.controller.stop_shell() is False  # nothing runs any more


async def test_a_bang_alone_says_what_is_missing(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "!")
        await pilot.press("enter")
        await until(pilot, lambda: "Type a command after !" in notices(app), what="the notice")
        assert not app.query(ToolCard)
        assert fake_llm.chat_requests == []


async def test_a_bang_command_while_a_turn_runs_waits_for_its_end(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # The reply is held until the command was typed: it runs after the turn, and the
    # next prompt's request carries it.
    fake_llm.add(Reply(text="First answer.", gate="go"), Reply(text="Second answer."))
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await type_text(app, pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: len(fake_llm.chat_requests) == 1, what="the first request")
        await type_text(app, pilot, "!touch after.txt && echo after-the-turn")
        await pilot.press("enter")
        await until(pilot, lambda: "runs when this turn ends" in notices(app), what="the notice")
        assert not (tmp_path / "after.txt").exists()
        fake_llm.open_gate("go")
        await until(pilot, lambda: (tmp_path / "after.txt").exists(), what="the command")
        await until(pilot, lambda: bool(app.query(ToolCard)), what="the command's card")
        await finish_a_turn(app, pilot, "and now?")
        assert "after-the-turn" in request_text(fake_llm.chat_requests[1])
        assert "after-the-turn" not in request_text(fake_llm.chat_requests[0])


async def test_a_bang_command_in_plain_mode(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Seen."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("!touch plain.txt && echo plain-bang\r")
    text = await plain.wait_for("plain-bang\n")
    assert "✓ bash touch plain.txt && echo plain-bang" in text
    assert (tmp_path / "plain.txt").exists()
    plain.type("and?\r")
    await plain.wait_for("── turn 1 · completed")
    assert await plain.quit() == 0
    assert "$ touch plain.txt && echo plain-bang\nplain-bang" in request_text(
        fake_llm.chat_requests[-1]
    ).replace("\\n", "\n")
