"""``/rewind`` (and Esc Esc) in the TUI: the session controller asks it for the turn
and what to restore, and tells it what to put back and what to say."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from textual.app import App

from dsh.ui.tui import dialogs
from dsh.ui.tui.prompt_input import PromptArea

if TYPE_CHECKING:
    from dsh.ui.rewinding import Preview, RewindChoice, RewindPick, TurnRow


class TuiRewinder:
    """The picker screen, and the rewound prompt back in the prompt box."""

    def __init__(self, app: App[Any], show: Callable[[str], None]) -> None:
        self.app = app
        self.show = show
        """A line under the transcript (the app's own notices)."""

    async def ask(
        self,
        turns: Sequence[TurnRow],
        preview: Preview,
        *,
        turn: TurnRow | None = None,
        choice: RewindChoice | None = None,
    ) -> RewindPick | None:
        return await dialogs.ask_rewind(self.app, turns, preview, turn=turn, choice=choice)

    def put_back(self, prompt: str) -> None:
        area = self.app.query_one(PromptArea)
        # What was typed meanwhile stays, after it.
        area.set_text("\n\n".join(text for text in (prompt, area.text) if text.strip()))
        area.focus()

    def said(self, text: str) -> None:
        self.app.run_worker(self._say(text), group="rewind-said")

    async def _say(self, text: str) -> None:
        # A rewind draws the transcript again from the fold (its notices of the UI's
        # own with it): said once that is done, it stays on screen.
        redrawing = [w for w in self.app.workers if w.group == "rewound" and not w.is_finished]
        if redrawing:
            await self.app.workers.wait_for_complete(redrawing)
        self.show(text)
