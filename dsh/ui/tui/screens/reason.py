"""A line for the model, written on a dialog in place of its buttons: the approval's
"why not", the plan review's "what should change".

The dialog opens it (its key or button); Enter gives it (:class:`ReasonBox.Given`, the
text, or None when left empty); the dialog's Esc closes it again, emptied, and the
choices are back. While it is open the dialog's screen carries the class ``writing``
(its stylesheet hides the buttons; its ``check_action`` turns the answering keys off,
so a letter or digit is part of the text).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

WRITING = "writing"
"""The class the dialog's screen carries while the box is open."""


class ReasonBox(Vertical):
    DEFAULT_CSS = """
    ReasonBox { height: auto; display: none; margin: 1 0 0 0; }
    ReasonBox.-open { display: block; }
    ReasonBox .hint { color: $text-muted; }
    """

    class Given(Message):
        """Enter in the box: what the person wrote (None when nothing)."""

        def __init__(self, text: str | None) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, placeholder: str, hint: str, input_id: str) -> None:
        super().__init__()
        self._placeholder = placeholder
        self._hint = hint
        self._input_id = input_id

    def compose(self) -> ComposeResult:
        yield Input(placeholder=self._placeholder, id=self._input_id)
        yield Static(self._hint, classes="hint")

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self) -> None:
        self.add_class("-open")
        self.screen.add_class(WRITING)
        self.query_one(Input).focus()
        self.screen.refresh_bindings()

    def close(self) -> None:
        """Back to the choices; what was written is dropped (the dialog moves the
        focus back where it wants it)."""
        self.remove_class("-open")
        self.screen.remove_class(WRITING)
        self.query_one(Input).value = ""
        self.screen.refresh_bindings()

    @on(Input.Submitted)
    def _given(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Given(event.value.strip() or None))
