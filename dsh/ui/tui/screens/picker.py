"""A picker: choose one of a few items from a list, with an optional live preview.

The ``/theme`` picker (each highlighted theme is applied at once, and Esc puts the
first back), the ``/model`` picker and the session's prompt list (Esc Esc) are this
screen with different items. Enter chooses the highlighted item (its index is the
result); Esc closes (None). The item shown as current starts highlighted and is
marked.

Public API: ``Picker(title, items, *, current=None, hint=None, preview=None)``, a
``ModalScreen[int | None]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from dsh.control_chars import visible

Item = str | Text
"""A plain string is shown as it is (after :func:`~dsh.control_chars.visible`); a
``Text`` when the caller styles it (and has made it visible already)."""


class Picker(ModalScreen[int | None]):
    DEFAULT_CSS = """
    Picker { align: center middle; }
    Picker #dialog {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    Picker #title { text-style: bold; }
    Picker #items { height: auto; max-height: 30; margin: 1 0 0 0; }
    Picker #hint { color: $text-muted; }
    """
    AUTO_FOCUS = "#items"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", show=False),
    ]

    def __init__(
        self,
        title: str,
        items: Sequence[Item],
        *,
        current: int | None = None,
        hint: str | None = None,
        preview: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.items = list(items)
        self.current = current
        self.hint = hint or "↑↓ choose · Enter: pick · Esc: close"
        self.preview = preview

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(visible(self.title_text, one_line=True)), id="title")
            yield OptionList(*self._options(), id="items")
            yield Static(self.hint, id="hint")

    def _options(self) -> list[Option]:
        options = []
        for index, item in enumerate(self.items):
            label = item.copy() if isinstance(item, Text) else Text(visible(item))
            if index == self.current:
                label.append("  (current)", style="dim")
            options.append(Option(label, id=str(index)))
        return options

    def on_mount(self) -> None:
        if self.items:
            self.query_one("#items", OptionList).highlighted = self.current or 0

    @on(OptionList.OptionHighlighted, "#items")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if self.preview is not None and event.option.id is not None:
            self.preview(int(event.option.id))

    @on(OptionList.OptionSelected, "#items")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.dismiss(int(event.option.id))

    def action_close(self) -> None:
        self.dismiss(None)
