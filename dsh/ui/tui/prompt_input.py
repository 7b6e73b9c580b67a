r"""The prompt: a multi-line ``TextArea`` with history, completion and paste folding.

Keys: Enter sends (while a turn runs, it steers the turn); Tab queues the text as a
follow-up instead (sent at once when no turn runs); Shift+Enter, Alt+Enter, Ctrl+J or ``\``
then Enter start a new line (most terminals send Shift+Enter as a plain Enter: Ctrl+J
and ``\`` Enter always work). Up on the first row and Down on the last browse earlier
prompts. While the completion menu is open, Up/Down move in it, Tab or Enter accept,
Esc closes it. PgUp/PgDn (and Home/End on an empty prompt) scroll the transcript;
Ctrl+Up/Ctrl+Down (or Alt+Up/Alt+Down) move a cursor over the transcript's tool
cards and thoughts, and Enter on an empty prompt opens or closes the one it is on;
Esc goes to the app (cancel the turn, leave the cards, or twice: the rewind
picker); Ctrl+R lists the session's prompts; Shift+Tab cycles the permission mode. These keys are handled in the prompt's own
queue of keys, in the order typed (see ``_on_key``).

A paste longer than :data:`PASTE_LINES` lines or :data:`PASTE_CHARS` characters
shows as ``[pasted text #1, 40 lines]``; the text itself is sent.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import OptionList, TextArea
from textual.widgets.option_list import Option

from dsh.control_chars import visible
from dsh.ui.prompt_history import PromptHistory
from dsh.ui.tui.completion import (
    Choice,
    Token,
    command_choices,
    list_files,
    path_choices,
    token_at,
    with_mentions,
)

if TYPE_CHECKING:
    from dsh.agent import MentionChoice, PasteResult
    from dsh.commands import Command

PASTE_LINES = 12
PASTE_CHARS = 1200
_PLACEHOLDER = re.compile(r"\[pasted text #(\d+), \d+ lines?\]")


class CompletionMenu(OptionList, can_focus=False):
    DEFAULT_CSS = """
    CompletionMenu { display: none; max-height: 10; height: auto; border: none;
        background: $panel; padding: 0 1; }
    """


class PromptArea(TextArea):
    DEFAULT_CSS = """
    PromptArea { height: auto; min-height: 3; max-height: 12; border: round $primary;
        padding: 0 1; }
    PromptArea:focus { border: round $accent; }
    """
    NEWLINE_KEYS: ClassVar[frozenset[str]] = frozenset({"ctrl+j", "shift+enter", "alt+enter"})
    """Keys that add a line, handled in ``_on_key`` in the order typed (as bindings
    they ran after the keys that followed them in a burst: 'a' Ctrl+J 'b' gave
    ``ab`` and a new line)."""
    BINDINGS: ClassVar[list[BindingType]] = [
        # What the terminal cannot paste itself (an image on the clipboard), through
        # the plugins that take pastes.
        Binding("ctrl+v", "paste_clipboard", show=False, id="prompt.paste-clipboard"),
        # A subclass's bindings replace its base's for the same key: say them again.
        Binding("up", "cursor_up", show=False),
        Binding("down", "cursor_down", show=False),
    ]

    class Submitted(Message):
        """The person sent the prompt (``queue``: as a follow-up for later)."""

        def __init__(self, text: str, *, queue: bool = False) -> None:
            super().__init__()
            self.text = text
            self.queue = queue

    class QueueEdit(Message):
        """Up on an empty prompt while follow-ups wait: take the last one back."""

    class CycleMode(Message):
        """Shift+Tab: the next permission mode."""

    class Escape(Message):
        """Esc, with no completion menu to close."""

    class PromptList(Message):
        """Ctrl+R: the session's earlier prompts, to take one back."""

    class CardCursor(Message):
        """Move the cursor over the transcript's cards: ``step`` -1 to an older one,
        1 to a newer one."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    class OpenCard(Message):
        """Enter on an empty prompt while the card cursor is on a card."""

    class Scroll(Message):
        """A key that scrolls the transcript: ``page_up``, ``page_down``, ``top`` or
        ``bottom``."""

        def __init__(self, where: str) -> None:
            super().__init__()
            self.where = where

    def __init__(self, menu: CompletionMenu, **kwargs: Any) -> None:
        super().__init__(
            id="prompt",
            soft_wrap=True,
            tab_behavior="focus",
            placeholder="Ask dsh anything · / for commands · @ to mention a file",
            **kwargs,
        )
        self.menu = menu
        self.prompts = PromptHistory()
        """Earlier prompts (``history`` is TextArea's own undo stack)."""
        self.commands: Callable[[str], Sequence[Command]] | None = None
        self.root: Path | None = None
        self.running: Callable[[], bool] = lambda: False
        self.queued: Callable[[], bool] = lambda: False
        self.on_card: Callable[[], bool] = lambda: False
        """Whether the transcript's card cursor is on a card."""
        self._files: list[str] | None = None
        self._listing = False
        self._token: Token | None = None
        self._choices: list[Choice] = []
        self._pastes: dict[int, str] = {}
        self.paste_handler: Callable[[str | None], Awaitable[PasteResult | None]] | None = None
        """Asks the plugins whether they take a paste (``None``: the clipboard)."""
        self.mentions: Callable[[str], Awaitable[Sequence[MentionChoice]]] | None = None
        """Asks the plugins what they offer for an ``@query``."""
        self._offered: tuple[str, list[Choice]] | None = None
        """The plugins' choices for the last ``@query`` asked about, while the menu is
        open."""
        self._asking: str | None = None

    # ------------------------------------------------------------------ actions

    async def _on_key(self, event: events.Key) -> None:
        """Enter, Tab, Up, Down, Esc and the new-line keys are handled
        here, in the prompt's own queue of keys: as bindings of high priority they
        ran as the app received them, ahead of the characters typed before them in
        the same burst (``hello`` and Enter in one read sent an empty prompt)."""
        handler = self._key_handler(event.key) or self._own_binding(event.key)
        if handler is None:
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()
        result = handler()
        if isinstance(result, Awaitable):
            await result

    def _own_binding(self, key: str) -> Callable[[], object] | None:
        """The prompt's binding for ``key`` (TextArea's Left, Backspace...), run here:
        Textual runs a widget's bindings once the key has bubbled up to the app, after
        the keys queued behind it ('ab' Left Ctrl+J put the line at the end)."""
        for binding in self._bindings.key_to_bindings.get(key, ()):
            if not binding.priority:
                action = binding.action
                return lambda: self.run_action(action)
        return None

    def _key_handler(self, key: str) -> Callable[[], object] | None:
        if key in ("enter", "tab", "up", "down", "escape") and self._menu_open():
            match key:
                case "enter" if self._token is not None and self._token.kind == "command":
                    return self._accept_and_send  # /help Enter runs /help at once
                case "enter" | "tab":
                    return self.action_menu_accept
                case "up":
                    return lambda: self.action_menu_move(-1)
                case "down":
                    return lambda: self.action_menu_move(1)
                case _:
                    return self.action_menu_close
        if key in self.NEWLINE_KEYS:
            return self.action_newline
        if key == "shift+tab":
            return lambda: self.post_message(self.CycleMode())
        if key == "escape":
            return lambda: self.post_message(self.Escape())
        if key == "ctrl+r":
            return lambda: self.post_message(self.PromptList())
        if key in ("ctrl+up", "alt+up", "ctrl+down", "alt+down"):
            cursor = self.CardCursor(-1 if key.endswith("up") else 1)
            return lambda: self.post_message(cursor)
        if key == "enter" and not self.text and self.on_card():
            return lambda: self.post_message(self.OpenCard())
        if key == "enter" and self._after_backslash():
            return self._backslash_newline
        if key == "enter":
            return self.action_submit
        if key == "tab" and (self.running() or self.text.strip()):
            # A follow-up: after the running turn, or now when none runs. Whether a
            # turn runs is not known yet for keys in the burst of the Enter that
            # starts one ('x' Enter 'y' Tab), and the text is the person's either way.
            # (On an empty idle prompt Tab moves the focus: to a dialog's buttons.)
            return self.action_queue
        # The transcript scrolls from the prompt: PgUp/PgDn always (the prompt is a
        # few lines high), Home/End when nothing is typed (else they edit the line).
        scroll = {"pageup": "page_up", "pagedown": "page_down", "home": "top", "end": "bottom"}
        if key in ("pageup", "pagedown") or (key in ("home", "end") and not self.text):
            message = self.Scroll(scroll[key])
            return lambda: self.post_message(message)
        return None

    def _menu_open(self) -> bool:
        # Keys typed in a burst run before the Changed messages they caused: look at
        # the text as it is now, not as the menu last saw it.
        self._refresh_menu()
        return bool(self.menu.display and self.menu.option_count > 0)

    def action_menu_move(self, step: int) -> None:
        highlighted = self.menu.highlighted or 0
        self.menu.highlighted = (highlighted + step) % self.menu.option_count

    def action_menu_accept(self) -> None:
        index = self.menu.highlighted
        token = self._token
        if index is None or token is None or index >= len(self._choices):
            self.close_menu()
            return
        choice = self._choices[index]
        row = self.cursor_location[0]
        self.close_menu()
        # (a prefix such as @server: is gone on from: its Changed opens the menu again)
        end = "" if choice.more else " "
        self.replace(choice.insert + end, (row, token.start), self.cursor_location)

    def _accept_and_send(self) -> None:
        self.action_menu_accept()
        self.action_submit()

    def action_menu_close(self) -> None:
        self.close_menu()

    def action_submit(self) -> None:
        self._send(queue=False)

    def action_queue(self) -> None:
        self._send(queue=True)

    def action_newline(self) -> None:
        self.insert("\n")

    def _after_backslash(self) -> bool:
        row, column = self.cursor_location
        return column > 0 and self.selection.is_empty and self.document[row][column - 1] == "\\"

    def _backslash_newline(self) -> None:
        r"""``\`` then Enter: the backslash becomes a new line, as in a shell."""
        row, column = self.cursor_location
        self.replace("\n", (row, column - 1), (row, column))

    def _send(self, *, queue: bool) -> None:
        text = self.expanded_text()
        if not text.strip():
            return
        self.prompts.add(self.text)
        self._pastes.clear()
        self.load_text("")
        self.close_menu()
        self.post_message(self.Submitted(text, queue=queue))

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0:
            if not self.text and self.queued():
                self.post_message(self.QueueEdit())
                return
            earlier = self.prompts.previous(self.text)
            if earlier is not None:
                self._show(earlier, at_end=False)
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == self.document.line_count - 1:
            later = self.prompts.next()
            if later is not None:
                self._show(later, at_end=True)
            return
        super().action_cursor_down(select)

    def _show(self, text: str, *, at_end: bool) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end if at_end else (0, len(self.document[0])))

    def set_text(self, text: str) -> None:
        """Replace what is typed (a queued message taken back to edit, say)."""
        self.prompts.reset()
        self.load_text(text)
        self.move_cursor(self.document.end)

    # ------------------------------------------------------------------ pasting

    class Notice(Message):
        """A line for the person about what a paste did."""

        def __init__(self, text: str, level: str) -> None:
            super().__init__()
            self.text = text
            self.level = level

    async def _offer(self, text: str | None) -> bool:
        """Whether a plugin took the paste (its text is then in the prompt)."""
        if self.paste_handler is None:
            return False
        result = await self.paste_handler(text)
        if result is None:
            return False
        if result.text and (done := self._replace_via_keyboard(result.text, *self.selection)):
            self.move_cursor(done.end_location)
        if result.notice:
            self.post_message(self.Notice(result.notice, result.level))
        return True

    async def action_paste_clipboard(self) -> None:
        if not await self._offer(None):
            self.action_paste()  # the text the app itself copied, as before

    async def _on_paste(self, event: events.Paste) -> None:
        # Textual calls every class's _on_paste in turn (TextArea's inserts a short
        # paste after this one returns): calling it here too put a paste in twice.
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        # One line (a file dragged onto the terminal pastes its path): a plugin may
        # take it, an image's path attaching the image.
        if "\n" not in text.strip() and len(text) <= 4096 and self.paste_handler is not None:
            event.prevent_default()
            event.stop()
            taken = await self._offer(text)
            if (
                not taken
                and not self.read_only
                and (done := self._replace_via_keyboard(text, *self.selection))
            ):
                self.move_cursor(done.end_location)
            return
        lines = len(text.splitlines()) or 1  # a copied block's final newline ends a line
        if lines <= PASTE_LINES and len(text) <= PASTE_CHARS:
            return
        event.prevent_default()  # TextArea's handler does not run
        event.stop()
        number = len(self._pastes) + 1
        self._pastes[number] = text
        noun = "line" if lines == 1 else "lines"
        self.replace(f"[pasted text #{number}, {lines} {noun}]", *self.selection)

    def expanded_text(self) -> str:
        """The prompt with each paste placeholder replaced by what was pasted."""
        if not self._pastes:
            return self.text

        def expand(match: re.Match[str]) -> str:
            return self._pastes.get(int(match.group(1)), match.group(0))

        return _PLACEHOLDER.sub(expand, self.text)

    # ------------------------------------------------------------------ completion

    @on(TextArea.Changed)
    @on(TextArea.SelectionChanged)
    def _refresh_menu(self) -> None:
        if self.selection.start != self.selection.end:
            self.close_menu()
            return
        row, column = self.cursor_location
        token = token_at(row, self.document[row][:column])
        self._token = token
        choices: list[Choice] = []
        if token is not None and token.kind == "command" and self.commands is not None:
            choices = command_choices(self.commands, token.query)
        elif token is not None and token.kind == "path":
            if self._files is None:
                self._list_files()
            else:
                choices = path_choices(self._files, token.query)
            choices = with_mentions(choices, self._plugin_choices(token.query), token.query)
        self._choices = choices
        if not choices:
            self.close_menu()
            return
        self.menu.clear_options()
        self.menu.add_options([_option(choice) for choice in choices])
        self.menu.highlighted = 0
        self.menu.display = True

    def _plugin_choices(self, query: str) -> list[Choice]:
        """The plugins' choices for ``query`` if known; else asked for (once), and the
        menu refreshed when they come."""
        if self.mentions is None:
            return []
        if self._offered is not None and self._offered[0] == query:
            return self._offered[1]
        if self._asking != query:
            self._asking = query
            self.run_worker(self._ask_plugins(query), group="at-choices", exclusive=True)
        return []

    async def _ask_plugins(self, query: str) -> None:
        assert self.mentions is not None
        try:
            offered = await self.mentions(query)
        except Exception:  # a completion menu is never worth the app
            offered = []
        choices = [Choice(c.insert, c.label, c.meta, more=c.more) for c in offered if c.usable()]
        self._offered, self._asking = (query, choices), None
        if self._token is not None and self._token.kind == "path" and self._token.query == query:
            self._refresh_menu()

    def close_menu(self) -> None:
        self.menu.display = False
        self._choices = []
        # The plugins are asked afresh next time: a server may have come up since.
        self._offered = None

    def _list_files(self) -> None:
        if self._listing or self.root is None:
            return
        self._listing = True
        root = self.root
        self.run_worker(lambda: list_files(root), thread=True, group="files", name="files")

    def on_worker_state_changed(self, event: Any) -> None:
        worker = event.worker
        if worker.name == "files" and worker.is_finished:
            self._listing = False
            self._files = worker.result if isinstance(worker.result, list) else []
            self._refresh_menu()

    def forget_files(self, root: Path | None = None) -> None:
        """The project changed (a new session elsewhere): list its files afresh."""
        self.root = root or self.root
        self._files = None


def _option(choice: Choice) -> Option:
    label = Text(visible(choice.label), style="bold")  # a file's name is the repository's
    if choice.meta:
        label.append(visible(f"  {choice.meta}"), style="dim")
    return Option(label)
