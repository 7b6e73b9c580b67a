"""The rewind picker screen in the real app: the turns, then the choices with the
summary of what restoring the code would do, shown before any choice restores it.
(``/rewind`` and Esc Esc through the real checkpoints and conversation are in
tests/ui/test_rewind.py and tests/e2e.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import OptionList, Static

from dsh.runtime import Runtime
from dsh.testing import FakeLLM
from dsh.ui.rewinding import NOT_COVERED, CodePreview, FileRow, RewindPick, TurnRow
from dsh.ui.tui import dialogs
from dsh.ui.tui.screens.rewind import RewindScreen
from tests.support.waits import HANG_S
from tests.ui.tui_support import shown, tui, until

NOW_MS = 1_764_000_000_000
TURNS = [
    TurnRow(
        turn=1, prompt="write the parser\nwith tests", time=NOW_MS, files=("a.py",), files_total=1
    ),
    TurnRow(
        turn=2,
        prompt="clean up",
        time=NOW_MS + 60_000,
        files=("a.py", "b.py", "c.py", "d.py"),
        files_total=7,
    ),
]


def options(screen: RewindScreen, which: str) -> list[tuple[str, bool]]:
    found = screen.query_one(which, OptionList)
    return [
        (str(found.get_option_at_index(i).prompt), found.get_option_at_index(i).disabled)
        for i in range(found.option_count)
    ]


async def test_the_turns_then_the_summary_then_the_choice(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    asked: list[int] = []

    async def preview(row: TurnRow) -> CodePreview:
        asked.append(row.turn)
        await release.wait()
        return CodePreview(
            files=(FileRow("a.py", "restore", 3, 1), FileRow("new.txt", "remove", 0, 2)),
            conflicts=("hand.txt",),
        )

    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        picked: asyncio.Task[RewindPick | None] = asyncio.create_task(
            dialogs.ask_rewind(app, TURNS, preview)
        )
        await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the picker")
        screen = app.screen
        assert isinstance(screen, RewindScreen)
        turns = options(screen, "#turns")
        assert "turn 2" in turns[0][0]
        assert "clean up" in turns[0][0]
        assert "a.py, b.py, c.py +4 more" in turns[0][0]
        assert "write the parser" in turns[1][0]
        assert "with tests" not in turns[1][0]

        await pilot.press("down", "enter")  # turn 1
        await until(pilot, lambda: asked == [1], what="the summary asked for")
        # Nothing restores code before the summary is on screen.
        assert [disabled for _, disabled in options(screen, "#choices")] == [
            True,
            False,
            True,
            False,
        ]
        assert NOT_COVERED in shown(screen.query_one("#preview", Static))
        release.set()
        await until(
            pilot,
            lambda: "restore a.py (+3 -1)" in shown(screen.query_one("#preview", Static)),
            what="the summary",
        )
        summary = shown(screen.query_one("#preview", Static))
        assert "remove new.txt (+0 -2)" in summary
        assert "hand.txt" in summary.split("left alone", 1)[1]
        assert "network calls" in summary
        await until(
            pilot,
            lambda: not any(disabled for _, disabled in options(screen, "#choices")),
            what="every choice offered",
        )

        # Esc goes back to the turns, and a turn picked again is worked out again.
        await pilot.press("escape")
        await until(pilot, lambda: screen.query_one("#turns").display, what="the turns")
        await pilot.press("up", "enter")  # the turn before was left highlighted: turn 2
        await until(pilot, lambda: asked == [1, 2], what="turn 2's summary")
        await until(
            pilot,
            lambda: not options(screen, "#choices")[2][1],
            what="code choices offered",
        )
        await pilot.press("down", "down", "enter")  # code only
        assert await asyncio.wait_for(picked, HANG_S) == RewindPick(2, "code")


async def test_code_that_cannot_be_restored_offers_the_conversation_only(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async def preview(row: TurnRow) -> CodePreview:
        return CodePreview(unavailable="no checkpoint was taken before turn 2")

    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        picked = asyncio.create_task(
            dialogs.ask_rewind(app, TURNS, preview, turn=TURNS[1], choice="code")
        )
        await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the picker")
        screen = app.screen
        assert isinstance(screen, RewindScreen)
        assert not screen.query_one("#turns").display  # the turn was given
        await until(
            pilot,
            lambda: "no checkpoint was taken" in shown(screen.query_one("#preview", Static)),
            what="the reason",
        )
        # The choices follow the preview: waited for, not read in the same instant.
        await until(
            pilot,
            lambda: (
                [disabled for _, disabled in options(screen, "#choices")]
                == [True, False, True, False]
            ),
            what="the code choices disabled",
        )
        choices = options(screen, "#choices")
        assert "cannot be restored" in choices[0][0]
        highlighted = screen.query_one("#choices", OptionList).highlighted
        assert highlighted == 1  # --code asked for, but only the conversation can go back
        await pilot.press("enter")
        assert await asyncio.wait_for(picked, HANG_S) == RewindPick(2, "conversation")

        again = asyncio.create_task(dialogs.ask_rewind(app, TURNS, preview, turn=TURNS[1]))
        await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the picker")
        await pilot.press("escape")  # the turn was given: Esc closes
        assert await asyncio.wait_for(again, HANG_S) is None
