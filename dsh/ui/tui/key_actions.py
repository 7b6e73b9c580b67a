"""What the app's own keys do, beyond editing the prompt: Ctrl+C, Esc, Shift+Tab,
Ctrl+R and taking a queued message back. Each depends on what is going on (a
selection, a running turn, a card under the cursor, a session viewer on top), and
two of them act on a second press within a moment (:class:`DoublePress`)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from textual.app import App
from textual.screen import Screen

from dsh.control_chars import visible
from dsh.ui.tui import dialogs

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.policy.permissions import PermissionMode
    from dsh.runtime import Runtime
    from dsh.ui.entries import TranscriptFold
    from dsh.ui.tui.prompt_input import PromptArea
    from dsh.ui.tui.selecting import SelectionCopier
    from dsh.ui.tui.transcript_view import Transcript

QUIT_WINDOW_S = 1.0
"""On an idle, empty prompt a second Ctrl+C within this many seconds quits."""
ESCAPE_WINDOW_S = 0.8
"""Esc twice within this long, nothing typed and no turn running: the rewind picker."""
MODE_CYCLE: tuple[PermissionMode, ...] = ("default", "accept-edits", "plan")
"""Shift+Tab's modes, in order."""


class KeyedApp(Protocol):
    """The app, as its keys act on it."""

    ready: asyncio.Event
    fold: TranscriptFold | None
    transcript: Transcript | None
    copier: SelectionCopier

    @property
    def prompt_area(self) -> PromptArea: ...
    @property
    def agent(self) -> Agent | None: ...
    @property
    def runtime(self) -> Runtime | None: ...
    def action_cancel_turn(self) -> bool: ...
    def card_hint(self, on: bool) -> None: ...
    async def submit(self, text: str, *, queue: bool = False) -> None: ...
    async def quit(self) -> None: ...
    # Textual's, as used here:
    @property
    def screen(self) -> Screen[object]: ...
    def notify(self, message: str, *, timeout: float | None = None) -> None: ...
    def run_worker(
        self, work: Coroutine[Any, Any, None], name: str | None = "", group: str = "default"
    ) -> object: ...


class DoublePress:
    """A key pressed a second time within ``window_s`` of the first."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._last = -math.inf

    def press(self) -> bool:
        """True for the second press of a pair; the next press starts a new pair."""
        now = self.clock()
        if now - self._last < self.window_s:
            self._last = -math.inf
            return True
        self._last = now
        return False

    def forget(self) -> None:
        """The press did something else: it is not the first of a pair."""
        self._last = -math.inf


class KeyActions:
    def __init__(self, app: KeyedApp) -> None:
        self.app = app
        self.ctrl_c = DoublePress(QUIT_WINDOW_S)
        self.escape_key = DoublePress(ESCAPE_WINDOW_S)

    def interrupt(self) -> None:
        """Ctrl+C: copy the selected text (transcript or prompt), else cancel the
        running turn, else clear the prompt, else (twice within a moment) quit."""
        app = self.app
        prompt = app.prompt_area
        selected = app.screen.get_selected_text() or prompt.selected_text
        if selected:
            app.copier.copy(selected, clear=True)
            return
        if self._viewing():
            # Keys in a session viewer are the viewer's: no turn is cancelled, and the
            # prompt it goes back to keeps its text.
            app.notify("Esc or q goes back to the prompt.", timeout=QUIT_WINDOW_S)
            return
        if app.action_cancel_turn():
            self.ctrl_c.forget()  # stopping a reply is not the first press of a quit
            return
        if prompt.text:
            prompt.set_text("")
            self.ctrl_c.forget()  # nor is clearing what was typed
            return
        if self.ctrl_c.press():
            app.run_worker(app.quit(), group="quit")
            return
        app.notify("Press Ctrl+C again to quit.", timeout=QUIT_WINDOW_S)

    def _viewing(self) -> bool:
        from dsh.ui.tui.screens.viewer import SessionViewer

        return isinstance(self.app.screen, SessionViewer)

    def escape(self) -> None:
        """Esc: leave the cards, else cancel the running turn, else (twice within a
        moment, nothing typed) open the rewind picker, as ``/rewind`` does."""
        app = self.app
        transcript = app.transcript
        if transcript is not None and transcript.on_card():
            transcript.clear_cursor()
            app.card_hint(False)
            return
        if app.action_cancel_turn():
            self.escape_key.forget()
            return
        if app.prompt_area.text:
            self.escape_key.forget()
            return
        if not self.escape_key.press():
            return
        if not app.ready.is_set() or app.agent is None or app.fold is None:
            return
        from dsh.ui.entries import UserEntry

        if not any(isinstance(entry, UserEntry) for entry in app.fold.entries):
            app.notify("No turn to rewind to yet.", timeout=2)
            return
        app.run_worker(app.submit("/rewind"), group="rewind")

    def cycle_mode(self) -> None:
        """Shift+Tab: default → accept-edits → plan → default. ``bypass`` is never a
        key press away; a session started in it, or in read-only (which ``/permissions``
        chooses: plan mode is what a person cycling wants, explore then propose, and
        read-only, which still asks about commands, is the rarer choice), leaves it for
        default."""
        runtime = self.app.runtime
        if runtime is None:
            return
        from dsh.tools.approval import APPROVALS

        approvals = runtime.root.get(APPROVALS)
        current = approvals.mode
        approvals.mode = (  # the status bar hears of it (PERMISSION_MODE_CHANGED)
            MODE_CYCLE[(MODE_CYCLE.index(current) + 1) % len(MODE_CYCLE)]
            if current in MODE_CYCLE
            else "default"
        )

    def edit_queued(self) -> None:
        """Take the newest queued message back into the prompt to edit or drop it."""
        from dsh.agent import Remove

        app = self.app
        if app.fold is None or app.agent is None or not app.fold.queued:
            return
        item = list(app.fold.queued.values())[-1]
        if app.agent.update_inbox(item.item_id, Remove()):
            app.prompt_area.set_text(item.text)

    def list_prompts(self) -> None:
        """Ctrl+R: this session's prompts, to take one back into an empty prompt."""
        if self.app.prompt_area.text:
            self.app.notify("Ctrl+R puts an earlier prompt into an empty prompt.", timeout=2)
            return
        self.app.run_worker(self._pick_prompt(), group="prompts")

    async def _pick_prompt(self) -> None:
        """The session's prompts, newest first; the one picked goes back into the
        prompt, to edit and send again."""
        from dsh.ui.entries import UserEntry

        app = self.app
        assert isinstance(app, App)  # the list is a screen pushed over it
        if app.fold is None:
            return
        prompts = [e.text for e in reversed(app.fold.entries) if isinstance(e, UserEntry)]
        if not prompts:
            app.notify("No prompts in this session yet.", timeout=2)
            return
        items = [visible(" ".join(text.split()), one_line=True)[:200] for text in prompts]
        picked = await dialogs.choose(
            app,
            "Earlier prompts of this session",
            items,
            hint="↑↓ choose · Enter: back into the prompt, to edit and send · Esc: close",
        )
        if picked is not None:
            app.prompt_area.set_text(prompts[picked])
            app.prompt_area.focus()
