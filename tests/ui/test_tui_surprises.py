"""The smaller surprises of issue 36, item 7, each under Pilot with the real app, a
real runtime and the scripted model: what a command shows right after another changed
things, and what the TUI keeps across runs."""

from __future__ import annotations

from pathlib import Path

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from dsh.ui.entries import NoticeEntry
from tests.ui.tui_support import finish_a_turn, screen_text, tui, type_text, until


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def notices(app: object) -> list[str]:
    fold = app.fold  # type: ignore[attr-defined]
    return [entry.text for entry in fold.entries if isinstance(entry, NoticeEntry)]


async def test_status_right_after_a_model_switch_names_the_new_model(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="hi"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "hello")  # the log now names deepseek-flash
        await type_text(app, pilot, "/model deepseek-v4-pro")
        await pilot.press("enter")
        await until(pilot, lambda: app.agent.options.model == "deepseek-v4-pro", what="switch")
        before = len(screen_text(app))
        await type_text(app, pilot, "/status")
        await pilot.press("enter")
        await until(pilot, lambda: "idle" in screen_text(app)[before:], what="/status")
        said = screen_text(app)[before:]
        assert "deepseek-v4-pro" in said
        assert "deepseek-flash" not in said
        assert len(fake_llm.chat_requests) == 1  # no request made it so


async def test_compact_says_its_result_once(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="First answer."))
    fake_llm.add(Reply(text="Second answer."))
    fake_llm.add(Reply(text="The summary of it all."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "first question")
        await finish_a_turn(app, pilot, "second question")
        await type_text(app, pilot, "/compact")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: any("Compacted" in text for text in notices(app)),
            what="the compaction",
        )
        await until(pilot, lambda: app.agent.status == "idle", what="idle")
        await pilot.pause(0.3)  # a second line, if one were coming, is shown by now
        said = [text for text in notices(app) if "Compacted" in text]
        assert len(said) == 1, said
        assert screen_text(app).count("Compacted") == 1
        assert "summary" in said[0]
        # What the notice does not say, the command adds: once.
        assert screen_text(app).count("The context holds about") == 1
        assert len(fake_llm.chat_requests) == 3
