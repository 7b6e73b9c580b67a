"""The trust dialog: may this folder's own configuration apply?

Shown once, before the runtime starts, when the project ships configuration that
would change what dsh does (its ``.dsh/settings.toml``) and the user has
not decided about the folder yet. It lists exactly what trusting would change, key
by key with its value and why it matters, then what else of the folder's trusting
turns on (its commands, MCP servers, subagent profiles, ``.env``), and offers Trust,
Don't trust (both recorded in the trust store) and Decide later (Esc: untrusted for
this run, nothing recorded).

It opens while the person may already be typing their first prompt, so no letter
answers it: printable keys and pastes always go back to the prompt. Decide later,
the answer that records nothing, has focus from the start; Enter answers with the
focused button, except in the dialog's first moments (:class:`KeyGuard`) and right
after letters typed for the prompt (until Tab or an arrow moves the focus): that
Enter sends the prompt, as it was meant to.

Public API: ``TrustScreen(question)``, a ``ModalScreen[TrustAnswer]``.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Static

from dsh.control_chars import visible
from dsh.ui.trusting import TrustAnswer, TrustQuestion
from dsh.ui.tui.screens.guard import KeyGuard, TypedEarly

FOCUS_STEPS = {"tab": 1, "right": 1, "shift+tab": -1, "left": -1}
"""The keys that move between the answers, and which way."""
MIN_CHANGES_ROWS = 3
"""The list's border and one line: fewer would not show that it is there."""
HINT = "Tab or ←/→ to choose, Enter to confirm · ↑/↓ scroll · Esc decides later (untrusted for now)"


class TrustScreen(ModalScreen[TrustAnswer]):
    DEFAULT_CSS = """
    TrustScreen { align: center middle; }
    TrustScreen #dialog {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    TrustScreen #title { text-style: bold; }
    TrustScreen #explain { color: $text-muted; margin: 1 0 0 0; }
    TrustScreen #changes {
        height: auto; max-height: 50vh; margin: 1 0 0 0;
        border: round $panel-lighten-2; background: $background;
    }
    TrustScreen #hint { color: $text-muted; margin: 1 0 0 0; }
    TrustScreen #buttons { height: auto; margin: 1 0 0 0; }
    TrustScreen #buttons Button { margin: 0 1 0 0; min-width: 10; }
    """
    # Decide later is focused in on_mount: "" here (None would take the app's
    # AUTO_FOCUS, which in another app could focus another button).
    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer('later')", "Decide later", show=False),
        Binding("up", "scroll_changes(-1)", show=False),
        Binding("down", "scroll_changes(1)", show=False),
        Binding("pageup", "scroll_changes(-10)", show=False),
        Binding("pagedown", "scroll_changes(10)", show=False),
    ]

    def __init__(self, question: TrustQuestion) -> None:
        super().__init__()
        self.question = question
        self.guard = KeyGuard()
        self._typed_at: Widget | None = None
        self._moved = False  # Tab or an arrow moved the focus: an Enter is for a button
        """The answer focused when letters last went to the prompt: until the focus
        moves from it, an Enter is theirs."""

    def compose(self) -> ComposeResult:
        question = self.question
        with Vertical(id="dialog"):
            yield Static(
                Text.assemble(
                    ("Trust this folder? ", "bold"),
                    visible(str(question.root), one_line=True),
                    style="bold",
                ),
                id="title",
            )
            source = (
                visible(str(question.project), one_line=True) if question.project else "this folder"
            )
            # What else trusting turns on, named here too: in a short terminal the list
            # below shows only its first lines.
            turned_on = ", ".join(visible(t.path, one_line=True) for t in question.turned_on)
            also = f"; trusting it also turns on its {turned_on} (below)" if turned_on else ""
            yield Static(
                Text(
                    f"{source} would change what dsh does{also}. Whoever wrote this "
                    "repository chose these values: trust it only if you trust them. Until "
                    "then, only settings that make dsh do less apply."
                ),
                id="explain",
            )
            changes = VerticalScroll(id="changes")
            changes.can_focus = False  # Tab goes straight to the answers
            with changes:
                yield Static(self._changes(), id="changes-body")
            yield Static(HINT, id="hint")
            with Horizontal(id="buttons"):
                # The safe answer first: a stray Tab and Enter must not trust anything.
                yield Button("Don't trust", id="distrust", variant="primary")
                yield Button("Trust", id="trust", variant="warning")
                yield Button("Decide later", id="later")

    def _changes(self) -> Text:
        text = Text()
        for number, item in enumerate(self.question.ignored):
            if number:
                text.append("\n")
            text.append(visible(item.key), style="bold")
            text.append(visible(f" = {item.value}"))
            text.append(visible(f"\n  {item.reason}"), style="dim")
        if self.question.turned_on:
            text.append("\n\nTrusting it also turns on:", style="bold")
        for thing in self.question.turned_on:
            text.append("\n")
            text.append(visible(thing.path, one_line=True), style="bold")
            text.append(f"\n  {thing.what}", style="dim")
        return text

    def on_mount(self) -> None:
        self.guard.start(self)
        self.set_focus(self.query_one("#later", Button), scroll_visible=False)

    def on_resize(self, event: events.Resize) -> None:
        # After the layout at the new size: how tall the rest is depends on the width.
        self.call_after_refresh(self._fit_changes)

    def _fit_changes(self) -> None:
        """Give the list of changes only the rows the rest of the dialog leaves: in a
        short terminal the list scrolls, and the answers stay on screen (a dialog of
        auto height would cut them off its bottom instead)."""
        dialog = self.query_one("#dialog")
        changes = self.query_one("#changes", VerticalScroll)
        rest = dialog.styles.gutter.height + changes.styles.margin.height
        for child in dialog.children:
            if child is not changes:
                rest += child.outer_size.height + child.styles.margin.height
        limit = min(self.size.height * 9 // 10 - rest, self.size.height // 2)
        changes.styles.max_height = max(limit, MIN_CHANGES_ROWS)

    def on_key(self, event: events.Key) -> None:
        """Letters go back to the prompt behind (no letter answers this dialog), and so
        does an Enter that follows them, or that is part of a run of typing begun
        before the dialog was there (the guard's rule), unless Tab or an arrow moved
        the focus first."""
        step = FOCUS_STEPS.get(event.key)
        if step is not None:
            # Moved here, as the key comes, not by a binding run later: a Tab and an
            # Enter in one burst (a terminal's read) would otherwise see the Enter
            # handled before the focus moved.
            event.stop()
            event.prevent_default()
            self._typed_at = None  # the person moves to an answer: Enter is for it now
            self._moved = True
            if step > 0:
                self.focus_next()
            else:
                self.focus_previous()
            return
        if self._typed_at is not None and self.focused is not self._typed_at:
            self._typed_at = None
        if event.is_printable and event.character:
            self._typed_at = self.focused
            self._to_prompt(event, event.character)
        elif event.key == "enter" and (
            self._typed_at is not None
            or not (self._moved or self.guard.starts_a_run(self.app, event))
        ):
            self._to_prompt(event, "", submit=True)

    def _to_prompt(self, event: events.Key, text: str, *, submit: bool = False) -> None:
        event.stop()
        event.prevent_default()
        self.app.post_message(TypedEarly(text, submit))

    def on_paste(self, event: events.Paste) -> None:
        """A paste meant for the prompt goes back to it too (nothing here takes text)."""
        event.stop()
        event.prevent_default()
        if event.text:
            self.app.post_message(TypedEarly(event.text))

    def action_scroll_changes(self, lines: int) -> None:
        self.query_one("#changes", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_answer(self, answer: TrustAnswer) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        event.stop()
        match event.button.id:
            case "trust":
                self.dismiss("trust")
            case "distrust":
                self.dismiss("distrust")
            case _:
                self.dismiss("later")
