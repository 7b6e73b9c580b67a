"""The dialog for a session another dsh is writing: fork it, wait for it, only read
it, or start a new session (:data:`dsh.ui.opening.BUSY_CHOICES`); Esc quits.

Public API: ``BusyScreen(message, *, guard_seconds=GUARD_SECONDS)``, dismissed with
the chosen ``BusyChoice`` or None.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from dsh.control_chars import visible
from dsh.ui.opening import BUSY_CHOICES, BusyChoice
from dsh.ui.tui.screens.guard import GUARD_SECONDS, KeyGuard


class BusyScreen(ModalScreen[BusyChoice | None]):
    DEFAULT_CSS = """
    BusyScreen { align: center middle; }
    BusyScreen #dialog {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    BusyScreen #title { text-style: bold; }
    BusyScreen #message { margin: 0 0 1 0; color: $text-muted; }
    BusyScreen OptionList { height: auto; }
    BusyScreen #hint { color: $text-muted; margin: 1 0 0 0; }
    """
    AUTO_FOCUS = "OptionList"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "quit", "Quit", show=False),
    ]

    def __init__(self, message: str, *, guard_seconds: float = GUARD_SECONDS) -> None:
        super().__init__()
        self.message = message
        self.guard = KeyGuard(guard_seconds)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("This session is open in another dsh", id="title")
            yield Static(Text(visible(self.message)), id="message")
            yield OptionList(*(Option(label, id=choice) for choice, label in BUSY_CHOICES))
            yield Static("↑↓ choose · Enter: go · Esc: quit", id="hint")

    def on_mount(self) -> None:
        self.guard.start(self)
        choices = self.query_one(OptionList)
        choices.highlighted = 0
        choices.focus()

    def on_key(self, event: events.Key) -> None:
        self.guard.catch(self, event)  # what was typed for the prompt goes back to it

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if not self.guard.open:
            return
        choice = event.option.id
        for known, _ in BUSY_CHOICES:
            if known == choice:
                self.dismiss(known)

    def action_quit(self) -> None:
        self.dismiss(None)
