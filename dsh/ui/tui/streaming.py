"""An answer streamed as markdown without stutter (see the TUI guide, §3).

Appending to Textual's ``Markdown`` for every token costs more than a core at 500
tokens/s, and the cost grows with the document. So :class:`AnswerView`:

1. buffers: it reads what arrived from its entry on a 10 Hz timer, never per token;
2. keeps the live ``Markdown`` small: past :attr:`AnswerView.SEAL_AT` characters it
   cuts at the last blank line outside a code fence and starts a new live part;
3. freezes each sealed part into one ``Static`` holding a rich ``Markdown``;
4. when the answer ends, shows the whole of it as one frozen ``Static``, exactly as
   a resumed session shows it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.markdown import Markdown as RichMarkdown
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Markdown, Static

if TYPE_CHECKING:
    from dsh.ui.entries import AnswerEntry

FLUSH_S = 0.1


def cut_point(source: str) -> int:
    """The index just after the last blank line outside a code fence, or -1."""
    index = source.rfind("\n\n")
    while index > 0:
        if source[:index].count("```") % 2 == 0:
            return index + 2
        index = source.rfind("\n\n", 0, index)
    return -1


def frozen(source: str) -> Static:
    view = Static(RichMarkdown(source, code_theme="ansi_dark"), classes="frozen")
    view.source = source  # type: ignore[attr-defined]
    return view


class AnswerView(Vertical):
    DEFAULT_CSS = """
    AnswerView { height: auto; padding: 0 1; margin: 1 0 0 0; }
    AnswerView Markdown { margin: 0; padding: 0; }
    AnswerView Markdown > * { margin: 0 0 1 0; }
    """
    SEAL_AT = 2000

    def __init__(self, entry: AnswerEntry, *, live: bool) -> None:
        super().__init__()
        self.entry = entry
        self.live = live
        self._shown = 0
        """Characters of the entry already handed to a widget."""
        self._part: Markdown | None = None
        self.live_source = ""
        """What the live part was given (its own ``source`` catches up asynchronously)."""
        self._timer: Timer | None = None
        self._flushing = False
        self._slow_until = 0.0

    def compose(self):  # type: ignore[no-untyped-def]
        if not self.live:
            self._shown = len(self.entry.text)
            yield frozen(self.entry.text)

    def on_mount(self) -> None:
        if self.live:
            self._timer = self.set_interval(FLUSH_S, self.flush)

    def sync(self) -> None:
        """The entry changed: the timer picks it up (and an ended answer at once)."""
        if self.live and self.entry.done and not self._flushing:
            self.call_later(self.flush)

    @property
    def source(self) -> str:
        return self.entry.text

    async def flush(self) -> None:
        if self._flushing or not self.live:
            return
        now = time.monotonic()
        if now < self._slow_until and not self.entry.done:
            return  # the last flush ran long: give the screen time to breathe
        self._flushing = True
        try:
            await self._flush()
        finally:
            self._flushing = False
        spent = time.monotonic() - now
        if spent > FLUSH_S:
            self._slow_until = time.monotonic() + spent

    async def _flush(self) -> None:
        entry = self.entry
        source = entry.text
        if entry.done:
            await self._finish(source)
            return
        fresh = source[self._shown :]
        if not fresh:
            return
        if self._part is None:
            self._part = Markdown()
            await self.mount(self._part)
        part = self._part
        old = self.live_source
        cut = cut_point(old + fresh) if len(old) + len(fresh) > self.SEAL_AT else -1
        if cut > len(old):
            head = fresh[: cut - len(old)]
            with self.app.batch_update():
                await self.mount(frozen(old + head), before=part)
                await part.remove()
            self._part = None
            self.live_source = ""
            self._shown += len(head)
            fresh = fresh[len(head) :]
            if fresh:
                self._part = Markdown()
                await self.mount(self._part)
        if fresh and self._part is not None:
            await self._part.append(fresh)
            self.live_source += fresh
            self._shown += len(fresh)

    async def _finish(self, source: str) -> None:
        """The answer ended: one frozen view of all of it, and no more timer."""
        self.live = False
        with self.app.batch_update():
            await self.remove_children()
            await self.mount(frozen(source))
        self._part = None
        self.live_source = ""
        self._shown = len(source)
        timer, self._timer = self._timer, None
        if timer is not None:
            # Last, and never from inside the timer's own callback (this may be it):
            # stopping a timer cancels the task that runs its callback.
            self.call_later(timer.stop)
