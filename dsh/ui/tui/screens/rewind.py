"""The rewind picker: the session's turns, then what to restore of the one picked.

First the turns, newest first: each with its prompt's first line, when it started
and the files it changed. Enter on one shows what restoring the code to before it
would do (the diff summary, the files changed by hand since that are left alone,
and what no checkpoint can undo), worked out while the choices are already on
screen: code and conversation, conversation only, code only, cancel. A choice that
restores code is offered only once the summary is shown (and never when the code
cannot be restored, with the reason). Esc goes back to the turns, or closes.

Public API: ``RewindScreen(turns, preview, *, turn=None, choice=None)``, a
``ModalScreen[RewindPick | None]``; ``turn`` and ``choice`` (from ``/rewind N
--code``) start it on the choices, that one highlighted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from dsh.ui.rewinding import (
    CHOICES,
    NOT_COVERED,
    CodePreview,
    Preview,
    RewindChoice,
    RewindPick,
    TurnRow,
    clock,
    files_touched,
    preview_lines,
)

TURNS_HINT = "↑↓ choose a turn · Enter: what rewinding to before it would do · Esc: close"
CHOICES_HINT = "↑↓ choose · Enter: do it · Esc: back"
WORKING = "Working out what restoring the code would change…"


class RewindScreen(ModalScreen[RewindPick | None]):
    DEFAULT_CSS = """
    RewindScreen { align: center middle; }
    RewindScreen #dialog {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    RewindScreen #title { text-style: bold; }
    RewindScreen #turns { height: auto; max-height: 20; margin: 1 0 0 0; }
    RewindScreen #preview-box { height: auto; max-height: 12; margin: 1 0 0 0; }
    RewindScreen #choices { height: auto; margin: 1 0 0 0; }
    RewindScreen #hint { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(
        self,
        turns: Sequence[TurnRow],
        preview: Preview,
        *,
        turn: TurnRow | None = None,
        choice: RewindChoice | None = None,
    ) -> None:
        super().__init__()
        self.turns = list(reversed(turns))  # newest first
        self.preview = preview
        self.fixed_turn = turn
        self.wanted = choice
        self.picked: TurnRow | None = None
        self.code: CodePreview | None = None
        """The summary of the turn picked, once worked out."""

    def compose(self) -> ComposeResult:
        now_ms = int(time.time() * 1000)
        with Vertical(id="dialog"):
            yield Static("Rewind to before a turn", id="title")
            yield OptionList(*(self._turn_option(row, now_ms) for row in self.turns), id="turns")
            with VerticalScroll(id="preview-box"):
                yield Static(id="preview")
            yield OptionList(id="choices")
            yield Static(TURNS_HINT, id="hint")

    @staticmethod
    def _turn_option(row: TurnRow, now_ms: int) -> Option:
        label = Text(f"turn {row.turn} · {clock(row.time, now_ms)} · ", style="dim")
        label.append(row.first_line, style="bold")
        label.no_wrap = True
        label.overflow = "ellipsis"
        label.append(f"\n  {files_touched(row)}", style="dim")
        return Option(label, id=str(row.turn))

    def on_mount(self) -> None:
        if self.fixed_turn is not None:
            self._show_choices(self.fixed_turn)
        else:
            self._show_turns()

    # ------------------------------------------------------------------ the turns

    def _show_turns(self) -> None:
        self.picked = None
        self.code = None
        self.workers.cancel_group(self, "preview")
        self.query_one("#title", Static).update("Rewind to before a turn")
        turns = self.query_one("#turns", OptionList)
        turns.display = True
        self.query_one("#preview-box").display = False
        self.query_one("#choices").display = False
        self.query_one("#hint", Static).update(TURNS_HINT)
        if self.turns and turns.highlighted is None:
            turns.highlighted = 0
        turns.focus()

    @on(OptionList.OptionSelected, "#turns")
    def _turn_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        row = next(row for row in self.turns if str(row.turn) == event.option.id)
        self._show_choices(row)

    # ------------------------------------------------------------------ the choices

    def _show_choices(self, row: TurnRow) -> None:
        self.picked = row
        self.code = None
        self.query_one("#title", Static).update(
            Text(f"Rewind to before turn {row.turn}: {row.first_line}")
        )
        self.query_one("#turns").display = False
        self.query_one("#preview-box").display = True
        self.query_one("#preview", Static).update(Text(f"{WORKING}\n\n{NOT_COVERED}"))
        self._fill_choices()
        self.query_one("#hint", Static).update(CHOICES_HINT)
        self._work_out(row)

    def _fill_choices(self) -> None:
        """The choices; those that restore code only once the summary is shown, and
        only when the code can be restored."""
        code = self.code
        choices = self.query_one("#choices", OptionList)
        choices.display = True
        choices.clear_options()
        for choice, label in CHOICES:
            restores_code = choice in ("both", "code")
            why = ""
            if restores_code and code is None:
                why = "  (working out the changes…)"
            elif restores_code and code is not None and not code.restorable:
                why = "  (the code cannot be restored)"
            text = Text(label)
            if why:
                text.append(why, style="dim")
            choices.add_option(Option(text, id=choice or "cancel", disabled=bool(why)))
        wanted = self.wanted or "both"
        ids = [choice or "cancel" for choice, _ in CHOICES]
        start = ids.index(wanted)
        if choices.get_option_at_index(start).disabled:
            start = ids.index("conversation")
        choices.highlighted = start
        choices.focus()

    @work(group="preview", exclusive=True, exit_on_error=False)
    async def _work_out(self, row: TurnRow) -> None:
        try:
            code = await self.preview(row)
        except Exception as error:  # said on the screen, never a traceback over it
            code = CodePreview(unavailable=f"could not work out the changes: {error}")
        if self.picked is not row:
            return  # the person went back meanwhile
        self.code = code
        lines = preview_lines(row, code)[1:]  # the title says the first
        self.query_one("#preview", Static).update(Text("\n".join(lines)))
        self._fill_choices()

    @on(OptionList.OptionSelected, "#choices")
    def _choice_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        row = self.picked
        if row is None or event.option.id in (None, "cancel"):
            self.dismiss(None)
            return
        chosen: RewindChoice = "both"
        for choice, _label in CHOICES:
            if choice is not None and choice == event.option.id:
                chosen = choice
        self.dismiss(RewindPick(row.turn, chosen))

    def action_back(self) -> None:
        if self.picked is not None and self.fixed_turn is None:
            self._show_turns()
            return
        self.dismiss(None)
