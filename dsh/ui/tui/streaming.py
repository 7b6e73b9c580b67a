"""An answer streamed as markdown without stutter, at a small part of a core (see the
TUI guide, §3).

At 500 tokens/s, rendering the growing answer again for every token (or appending
to Textual's ``Markdown``, a widget for every block) costs more than a core, and
the cost grows with the answer. What stays is the screen's: each repaint that adds
lines lays out and redraws the whole transcript. So :class:`AnswerView`, one widget
that hands the screen only the lines it shows:

1. buffers: it shows what arrived from its entry :data:`FRAME_S` after it arrived,
   never per token, and after a repaint that added lines it waits :data:`GROW_S`;
   other repaints redraw only the lines that changed;
2. renders each finished block (the text up to the last blank line outside a code
   fence) as markdown once, and lays out again only the block still being written,
   as plain text (a markdown render of it would cost more than the repaint);
3. when the answer ends, renders the whole of it as markdown, once for each width,
   exactly as a resumed session shows it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.visual import Visual, visualize
from textual.widget import Widget

from dsh.ui.tui.selecting import selectable, selected_text

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.style import Style
    from textual.selection import Selection

    from dsh.ui.entries import AnswerEntry

FRAME_S = 0.05
"""How long text waits to be shown, so that what arrives meanwhile is shown with it."""
GROW_S = 0.3
"""How long after a repaint that added lines the next one waits. Adding lines lays
out and redraws the whole transcript (10-20 ms of CPU on a slow machine), so this
sets what a fast stream costs. A model at a usual pace adds a line less often than
this anyway; one at 500 tokens/s adds a dozen lines each time, faster than anyone
reads."""
CODE_THEME = "ansi_dark"


def cut_point(source: str) -> int:
    """The index just after the last blank line outside a code fence, or -1."""
    index = source.rfind("\n\n")
    while index > 0:
        if source[:index].count("```") % 2 == 0:
            return index + 2
        index = source.rfind("\n\n", 0, index)
    return -1


def _apart(above: list[Strip], below: list[Strip]) -> bool:
    """Whether a blank line goes between two runs of lines, as a render of the whole
    answer spaces its blocks (some blocks, a list or a quote, start with one)."""
    return bool(above and below) and bool(above[-1].text.strip() and below[0].text.strip())


class AnswerView(Widget):
    """An answer: while it streams, its finished blocks as markdown and the block
    still being written as text; once it has ended, all of it as markdown."""

    DEFAULT_CSS = "AnswerView { height: auto; padding: 0 1; margin: 1 0 0 0; }"
    virtual_size = Reactive(Size(0, 0), layout=False, repaint=False)
    """Its size changes as it grows, in a layout that draws it: no second one, and no
    repaint after it."""

    def __init__(self, entry: AnswerEntry, *, live: bool) -> None:
        super().__init__()
        self.entry = entry
        self.live = live
        self.blocks: list[str] = []
        """The finished blocks shown while it streams."""
        self.tail = ""
        """The block still being written, as shown."""
        self._settled_chars = 0
        self._shown_chars = 0
        self._for: tuple[int, Style] | None = None
        """The width and style the lines below were rendered for."""
        self._whole: list[Strip] | None = None
        self._settled: list[Strip] = []
        self._rendered_blocks = 0
        self._tail_lines: list[Strip] = []
        self._tail_for: str | None = None
        self._between = 0
        """1 if a blank line goes between the settled blocks and the tail."""
        self._timer: Timer | None = None
        self._next = 0.0
        """When lines may be added again."""

    @property
    def source(self) -> str:
        return self.entry.text

    @property
    def shown(self) -> str:
        """The text the widget draws: all of it once the answer has ended."""
        return self.entry.text if not self.live else "".join(self.blocks) + self.tail

    def on_mount(self) -> None:
        self.sync()

    def sync(self) -> None:
        """The entry changed: show it when it is time, and an ended answer at once.
        A timer for each repaint, not one that ticks: it would cost as much again
        while nothing arrives."""
        if not self.live:
            return
        if self.entry.done:
            self.call_later(self.flush)
        elif self._timer is None:
            wait = max(FRAME_S, self._next - time.monotonic())
            self._timer = self.set_timer(wait, self._due)

    def _due(self) -> None:
        self._timer = None  # first: _finish must never stop the timer it runs in
        self.flush()

    def flush(self) -> None:
        """Show what arrived, unless lines were added moments ago; an ended answer at
        once, all of it as markdown."""
        if not self.live:
            return
        began = time.monotonic()
        if self.entry.done:
            self._finish()
        elif began < self._next:
            self.sync()  # the screen laid itself out for this answer moments ago
        else:
            self._show(began)

    def _show(self, began: float) -> None:
        source = self.entry.text
        if len(source) == self._shown_chars:
            return
        live = source[self._settled_chars :]
        cut = max(cut_point(live), 0)
        blocks, tail = ([live[:cut]] if cut else []), live[cut:]
        before = self._height()
        self._settled_chars += cut
        self._shown_chars = len(source)
        self.blocks += blocks
        self.tail = tail
        self._prepare()
        if self._height() != before:
            self.refresh(layout=True)
            # A render that ran long (a big block) earns the screen as long again.
            self._next = began + max(GROW_S, 2 * (time.monotonic() - began))
        elif blocks:  # as many lines of markdown as there were of text
            self.refresh()
        else:
            first = len(self._settled) + self._between
            self.refresh(Region(0, first, self.size.width, len(self._tail_lines)))

    def _finish(self) -> None:
        """The answer ended: all of it as markdown, and no more repaints to come."""
        self.live = False
        self.blocks, self.tail = [], ""
        self._settled, self._tail_lines, self._for = [], [], None
        self.refresh(layout=True)
        if self._timer is not None:  # a repaint still to come (never the running one)
            self._timer.stop()
            self._timer = None

    # ------------------------------------------------------------------ lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._prepare(width)
        return self._height()

    def render_line(self, y: int) -> Strip:
        return selectable(self, self._drawn_line(y), y)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        # The lines drawn, not Widget.render's text, which for a widget drawing its
        # own lines is its class name.
        self._prepare()
        lines = [self._drawn_line(y).text for y in range(self._height())]
        return selected_text(lines, selection), "\n"

    def _drawn_line(self, y: int) -> Strip:
        self._prepare()
        if self._whole is not None:
            lines = self._whole
        else:
            settled = len(self._settled)
            if y < settled:
                return self._settled[y]
            y -= settled + self._between
            lines = self._tail_lines
        return lines[y] if 0 <= y < len(lines) else Strip.blank(self.size.width)

    def _height(self) -> int:
        if self._whole is not None:
            return len(self._whole)
        return len(self._settled) + self._between + len(self._tail_lines)

    def _prepare(self, width: int = 0) -> None:
        """Render what is not rendered yet for ``width`` (the widget's own by default)."""
        width = width or self.size.width
        if not width:
            return
        style = self.visual_style.rich_style
        if self._for != (width, style):  # first, or resized, or a new theme
            self._for = (width, style)
            self._whole, self._settled, self._rendered_blocks, self._tail_for = None, [], 0, None
        # markdown-it and pygments (30 ms of a launch) wait for the first answer
        from rich.markdown import Markdown as RichMarkdown

        if not self.live:
            if self._whole is None:
                markdown = RichMarkdown(self.entry.text, code_theme=CODE_THEME)
                self._whole = self._strips(markdown, width)
            return
        for block in self.blocks[self._rendered_blocks :]:
            lines = self._strips(RichMarkdown(block, code_theme=CODE_THEME), width)
            if _apart(self._settled, lines):
                self._settled.append(Strip([]))
            self._settled += lines
        self._rendered_blocks = len(self.blocks)
        if self._tail_for != self.tail:
            self._tail_for = self.tail
            self._tail_lines = self._strips(Text(self.tail), width) if self.tail else []
        self._between = int(_apart(self._settled, self._tail_lines))

    def _strips(self, renderable: RenderableType, width: int) -> list[Strip]:
        # As a Static draws its content, so that the ended answer looks exactly as
        # one did before this widget drew it itself.
        # The selection is highlighted by line drawn (render_line), not in these lines,
        # which are kept while it changes.
        return Visual.to_strips(
            self,
            visualize(self, renderable),
            width,
            None,
            self.visual_style,
            apply_selection=False,
        )
