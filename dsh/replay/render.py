"""The transcript of a session as the TUI draws it, at a fixed size, as text or SVG.

The real transcript widget (:class:`dsh.ui.tui.transcript_view.Transcript`) in a Textual app
of its own, run headless at ``width`` x ``height``, fed the fold of the session's
events; the screen is then read back (text: its lines; SVG: Textual's screenshot).
Rendered from the log, with this dsh's fold and widgets, so a change to what people
see shows as a difference from a rendering kept beside a recorded session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from dsh.session import SessionEvent

RenderFormat = Literal["text", "svg"]


def parse_size(text: str) -> tuple[int, int]:
    """``100x30`` as (columns, rows); ValueError saying what is wrong otherwise."""
    columns, sep, rows = text.lower().partition("x")
    if not sep or not columns.isdigit() or not rows.isdigit():
        raise ValueError(f"a size is COLUMNSxROWS, such as 100x30, not {text!r}")
    width, height = int(columns), int(rows)
    if not (20 <= width <= 500 and 5 <= height <= 500):
        raise ValueError(f"{text}: give 20 to 500 columns and 5 to 500 rows")
    return width, height


async def render_transcript(
    events: Sequence[SessionEvent], *, width: int, height: int, form: RenderFormat = "text"
) -> str:
    from textual.app import App, ComposeResult

    from dsh.ui.entries import TranscriptFold
    from dsh.ui.tui.transcript_view import Transcript

    fold = TranscriptFold()
    for event in events:
        fold.apply(event)

    class TranscriptOnly(App[None]):
        def compose(self) -> ComposeResult:
            yield Transcript(None)

    app = TranscriptOnly()
    async with app.run_test(size=(width, height)) as pilot:
        transcript = app.query_one(Transcript)
        await transcript.show(fold)
        await pilot.pause()
        if form == "svg":
            return app.export_screenshot(title="dsh replay")
        # The screen as drawn, line by line (Textual offers text only through its
        # compositor, as the copy tests read it).
        lines = [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]
    return "\n".join(lines).rstrip("\n") + "\n"
