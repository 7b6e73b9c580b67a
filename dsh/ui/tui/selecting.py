"""Selecting text in the transcript by the lines as drawn, so that a mouse selection
copies exactly the text shown in the region selected.

Textual selects a widget's text through offsets its renderer puts on each drawn cell,
and reads the selection back from the widget's source text (``Widget.get_selection``).
That works for a widget that shows a ``Text``: it gives no offsets and no text for
one that shows a rich renderable (a markdown answer, a tool card, a notice), and a
widget that draws its own lines (:class:`~dsh.ui.tui.streaming.AnswerView`) copies
what ``Widget.render`` returns, its class name. So the transcript's widgets select by
drawn line instead: line ``y`` of a widget carries offsets ``(x, y)``, ``x`` counting
the characters of that line, and a selection copies those lines' characters, each
line without the blanks that pad it to the widget's width. A line wrapped to fit the
width copies as the lines shown; ``/copy`` copies an answer's markdown source.

Public API:

- :class:`SelectByLine`: a mixin for a ``Static`` that selects this way.
- ``selectable(widget, strip, y) -> Strip``: line ``y`` with its offsets, and the
  selection's highlight where it is selected (for a widget drawing its own lines).
- ``selected_text(lines, selection) -> str``: what ``selection`` covers of ``lines``.
- :class:`SelectionCopier`: the app's copy of a selection when the mouse is released.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.segment import Segment
from textual.app import App
from textual.dom import NoScreen
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.selection import Selection

    _Mixin = Widget
else:
    # Not a Widget at run time: Textual would give the mixin Widget's default CSS,
    # ranked above the Static's own (its height: auto).
    _Mixin = object


def selection_of(widget: Widget) -> Selection | None:
    """The part of ``widget`` selected, if any (read from the screen: these widgets
    hide it from Textual's own drawing, see :class:`SelectByLine`)."""
    try:
        return widget.screen.selections.get(widget)
    except NoScreen:  # not mounted (yet): nothing selected
        return None


def selectable(widget: Widget, strip: Strip, y: int) -> Strip:
    """Line ``y`` of ``widget`` with the offsets Textual maps a mouse position to, and
    the selection's highlight on the characters selected."""
    selection = selection_of(widget)
    span = None if selection is None else selection.get_span(y)
    if span is None:
        return strip.apply_offsets(0, y)
    text = strip.text.rstrip()
    start, end = span
    end = len(text) if end == -1 else min(end, len(text))
    if start >= end:
        return strip.apply_offsets(0, y)
    # Offsets count characters; a strip divides at cells (a wide character takes two).
    left, right = cell_len(text[:start]), cell_len(text[:end])
    before, middle, after = strip.divide([left, right, strip.cell_length])[:3]
    selected = Style.from_styles(widget.screen.get_component_styles("screen--selection"))
    # Over the widget's own style, so that a translucent highlight blends as Textual
    # blends it; and over each character's style, which would otherwise hide it.
    style = (widget.visual_style + selected).rich_style
    middle = Strip(Segment.apply_style(middle, post_style=style), middle.cell_length)
    # Offsets last: each segment's counts from where that segment begins.
    return Strip.join([before, middle, after]).apply_offsets(0, y)


def selected_text(lines: Sequence[str], selection: Selection) -> str:
    """The characters ``selection`` covers of ``lines`` (each without the blanks that
    pad it), one line of text for each line drawn."""
    out: list[str] = []
    for y, line in enumerate(lines):
        span = selection.get_span(y)
        if span is None:
            continue
        text = line.rstrip()
        start, end = span
        out.append(text[start:] if end == -1 else text[start:end])
    return "\n".join(out)


class SelectByLine(_Mixin):
    """A widget (a ``Static``, mixed in first) whose selection is by line drawn."""

    @property
    def text_selection(self) -> Selection | None:
        # Textual highlights a selection in the coordinates of the source text while
        # it draws; these widgets highlight theirs by line drawn, in render_line.
        return None

    def render_line(self, y: int) -> Strip:
        return selectable(self, super().render_line(y), y)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        lines = [super(SelectByLine, self).render_line(y).text for y in range(self.size.height)]
        return selected_text(lines, selection), "\n"


class SelectionCopier:
    """Copy what the mouse selected when its button is released (``[tui]
    copy_on_select``), once per gesture, and say how much was copied."""

    REPEAT_S = 1.0
    """A release and the click of one gesture come within this long."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self._last: tuple[str, object, float] = ("", None, 0.0)

    def after_release(self) -> None:
        self.app.call_after_refresh(self._copy_selection)

    def _copy_selection(self) -> None:
        selected = self.app.screen.get_selected_text()
        if not selected:  # a plain click is a release with nothing selected
            return
        now = time.monotonic()
        last_text, last_screen, last_time = self._last
        if (selected, self.app.screen) == (
            last_text,
            last_screen,
        ) and now - last_time < self.REPEAT_S:
            return
        self._last = (selected, self.app.screen, now)
        self.copy(selected, clear=False)

    def copy(self, text: str, *, clear: bool) -> None:
        self.app.copy_to_clipboard(text)
        if clear:
            self.app.screen.clear_selection()
        lines = text.count("\n") + 1
        self.app.notify(f"Copied {lines} line{'s' if lines != 1 else ''}.", timeout=1.5)
