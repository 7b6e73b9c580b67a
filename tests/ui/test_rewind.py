"""``/rewind`` through the real app and plain mode, the real checkpoints and the real
conversation, against the scripted server: Esc Esc opens the picker, the code and the
conversation go back to before the turn picked, and its prompt comes back to edit."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.input import PipeInput
from textual.widgets import OptionList, Static

from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.tui.screens.rewind import RewindScreen
from tests.e2e.harness import user_texts
from tests.ui.plain_support import Plain
from tests.ui.tui_support import shown, tui, type_text, until


def write(path: str, content: str) -> ToolCallSpec:
    return ToolCallSpec(name="write", arguments={"file_path": path, "content": content})


def two_turns(fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(tool_calls=[write("one.txt", "one\n")]), Reply(text="Wrote one."))
    fake_llm.add(Reply(tool_calls=[write("two.txt", "two\n")]), Reply(text="Wrote two."))


async def test_escape_twice_rewinds_code_and_conversation(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime.root.get(APPROVALS).mode = "bypass"
    two_turns(fake_llm)
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        for sent, prompt in ((2, "first prompt"), (4, "second prompt")):
            await type_text(app, pilot, prompt)
            await pilot.press("enter")
            await until(
                pilot,
                lambda sent=sent: (
                    len(fake_llm.requests) == sent
                    and app.agent is not None
                    and app.agent.status == "idle"
                    and app.fold is not None
                    and type(app.fold.entries[-1]).__name__ == "TurnFooter"
                ),
                what=f"{prompt}'s turn",
            )
        await until(pilot, lambda: (tmp_path / "two.txt").exists(), what="the second write")
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the picker")
        screen = app.screen
        assert isinstance(screen, RewindScreen)
        turns = screen.query_one("#turns", OptionList)
        listed = [str(turns.get_option_at_index(i).prompt) for i in range(turns.option_count)]
        assert "second prompt" in listed[0]
        assert "two.txt" in listed[0]
        assert "first prompt" in listed[1]
        assert "one.txt" in listed[1]
        await pilot.press("down", "enter")
        choices = screen.query_one("#choices", OptionList)
        await until(
            pilot,
            lambda: choices.option_count == 4 and not choices.get_option_at_index(0).disabled,
            what="the summary",
        )
        summary = shown(screen.query_one("#preview", Static))
        assert "remove one.txt" in summary
        assert "remove two.txt" in summary
        assert "network calls" in summary
        await pilot.press("enter")  # code and conversation, highlighted first
        await until(pilot, lambda: app.prompt_area.text == "first prompt", what="the prompt back")
        assert not isinstance(app.screen, RewindScreen)
        assert not (tmp_path / "one.txt").exists()
        assert not (tmp_path / "two.txt").exists()

        fake_llm.add(Reply(text="Again from the start."))
        await pilot.press("enter")
        await until(pilot, lambda: len(fake_llm.requests) == 5, what="the prompt sent again")
        texts = user_texts(fake_llm.requests[-1].body)
        assert texts[-1] == "first prompt"
        assert sum("first prompt" in text for text in texts) == 1
        assert not any("second prompt" in text for text in texts)
        await until(pilot, lambda: app.agent is not None and app.agent.status == "idle")
        # With text typed, Esc Esc leaves it alone.
        await type_text(app, pilot, "a draft")
        await pilot.press("escape", "escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, RewindScreen)
        assert app.prompt_area.text == "a draft"


async def test_escape_twice_in_a_new_session_says_there_is_nothing_to_rewind(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        await pilot.press("escape", "escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, RewindScreen)
        assert app.agent is not None
        assert not [e for e in app.agent.session.events if e.type == "command/run"]


async def test_plain_mode_rewinds_through_numbered_lists(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM, pipe: PipeInput
) -> None:
    runtime.root.get(APPROVALS).mode = "bypass"
    two_turns(fake_llm)
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("first prompt\r")
    await plain.wait_for("turn 1 · completed")
    plain.type("second prompt\r")
    await plain.wait_for("turn 2 · completed")
    plain.type("/rewind\r")
    await plain.wait_for("2. turn 1")
    text = plain.text.split("Rewind to before which turn?", 1)[1]
    assert "1. turn 2" in text
    assert "second prompt" in text
    assert "two.txt" in text
    plain.type("2\r")  # turn 1
    await plain.wait_for("4. Cancel")
    shown_before = plain.text.split("Rewind to before turn 1", 1)[1].split("Restore what?", 1)[0]
    assert "remove one.txt" in shown_before
    assert "network calls" in shown_before
    plain.type("3\r")  # code only
    await plain.wait_for("Rewound the code to before turn 1.")
    assert not (tmp_path / "one.txt").exists()
    assert not (tmp_path / "two.txt").exists()
    # The conversation stays; the model is told its files went back.
    fake_llm.add(Reply(text="Understood."))
    plain.type("what now?\r")
    await plain.wait_for("Understood.")
    texts = user_texts(fake_llm.requests[-1].body)
    assert any("second prompt" in text for text in texts)
    assert any("rewound the files to before turn 1" in text for text in texts)
    assert await plain.quit() == 0
