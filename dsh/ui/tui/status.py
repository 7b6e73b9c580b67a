"""The lines around the prompt: the status bar, queued messages and plugins' panels.

All three draw from the :class:`~dsh.ui.entries.TranscriptFold` (so from session
events) and redraw when told the fold changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:  # the fold and its renderers load with the runtime, after the first frame
    from dsh.sandbox import SandboxStatus
    from dsh.ui.entries import TranscriptFold

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class StatusBar(Static):
    """``model · state · tokens · ctx % · cost · cache %``, a spinner while busy, the
    permission mode and the sandbox."""

    DEFAULT_CSS = "StatusBar { height: 1; padding: 0 1; color: $text-muted; }"

    def __init__(self) -> None:
        super().__init__(id="status")
        self.fold: TranscriptFold | None = None
        self.note = "starting…"
        self.asking = False
        """A question dialog waits for the person (the log only says a tool runs)."""
        self.next_model: str | None = None
        """The model the next request will use, shown while idle."""
        self.mode = "default"
        """The permission mode, shown when it is not ``default``."""
        self.unsaved = False
        """The session's writes are failing: what happens now is not stored."""
        self.sandbox: SandboxStatus | None = None
        """Known once the app is ready (learning it starts a bwrap)."""
        self._frame = 0
        self._shown: Text | None = None

    @contextmanager
    def waiting_for_person(self) -> Iterator[None]:
        """While a dialog waits for the person: the log only says a tool runs."""
        self.asking = True
        self.show()
        try:
            yield
        finally:
            self.asking = False
            self.show()

    def on_mount(self) -> None:
        self.set_interval(0.1, self._spin)
        self.show()

    def _spin(self) -> None:
        if self.fold is not None and self.fold.status.state != "idle":
            self._frame += 1
            # Only the spinner moved (ten times a second while a turn runs): a repaint
            # of this line, not a layout of the screen.
            self.show(layout=False)

    def show(self, *, layout: bool = True) -> None:
        fold = self.fold
        if fold is None:
            self._put(Text(self.note, style="italic"), layout)
            return
        import dataclasses

        from dsh.ui.render import render_status

        shown = fold.status
        if self.asking:
            shown = dataclasses.replace(shown, state="waiting-for-you")
        elif shown.state == "idle" and self.next_model:
            shown = dataclasses.replace(shown, model=self.next_model)
        status = render_status(shown, queued=len(fold.queued))
        if fold.status.state != "idle":
            status = Text.assemble((SPINNER[self._frame % len(SPINNER)] + " ", "bold"), status)
        if self.mode != "default":
            style = "bold red" if self.mode == "bypass" else "bold yellow"
            status.append(f"  ⏵ {self.mode}", style=style)
        if self.unsaved:  # before what a narrow terminal may cut off
            status.append("  ⚠ not saved", style="bold red")
        if self.sandbox is not None:
            # Uncontained commands are marked as loudly as the bypass mode.
            off = self.sandbox.policy == "off"
            style = "bold red" if off else "bold yellow" if self.sandbox.unavailable else ""
            status.append(f"  {self.sandbox.label()}", style=style)
        if self.note:
            status.append(f"  {self.note}", style="italic")
        self._put(status, layout)

    def _put(self, status: Text, layout: bool) -> None:
        if status != self._shown:  # told again with nothing new: nothing to redraw
            self._shown = status
            self.update(status, layout=layout)


class QueuePanel(Static):
    """Messages waiting for the running turn: ``» steering`` or ``+ queued``."""

    DEFAULT_CSS = """
    QueuePanel { height: auto; max-height: 6; padding: 0 1; color: $text-muted;
        display: none; }
    """

    def show(self, fold: TranscriptFold) -> None:
        items = list(fold.queued.values())
        self.display = bool(items)
        if not items:
            return
        text = Text()
        for item in items:
            mark = "» " if item.placement == "steering" else "+ "
            if text:
                text.append("\n")
            text.append(mark, style="bold")
            text.append(item.text.replace("\n", " ⏎ ")[:200])
        text.append("\n↑ on an empty prompt takes the last one back to edit", style="dim")
        self.update(text)


class PanelsView(Static):
    """What plugins show beside the prompt while a turn runs (a checklist, say), one
    panel after another."""

    DEFAULT_CSS = """
    PanelsView { height: auto; max-height: 10; padding: 0 1; display: none; }
    """

    def show(self, fold: TranscriptFold) -> None:
        panels = list(fold.panels.values())
        self.display = bool(panels) and fold.status.state != "idle"
        if not self.display:
            return
        from rich.console import Group

        from dsh.ui.render import render_presentation, visible_view

        shown = [
            render_presentation(visible_view(view), expanded=True, show_title=False)
            for view in panels
        ]
        self.update(shown[0] if len(shown) == 1 else Group(*shown))
