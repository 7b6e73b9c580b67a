"""The cancellation signal of one turn."""

from __future__ import annotations

import asyncio

from dsh.session import CancelCause


class TurnSignal(asyncio.Event):
    """Set when the turn is cancelled; the first cause wins. The loop never cancels its
    own task: it races model and tool I/O against this, and always writes the closing
    events, so an aborted turn leaves a sound log."""

    def __init__(self) -> None:
        super().__init__()
        self.cause: CancelCause | None = None

    def abort(self, cause: CancelCause) -> None:
        if not self.is_set():
            self.cause = cause
            self.set()

    @property
    def aborted(self) -> bool:
        return self.is_set()


class TurnCancelled(Exception):
    """Raised inside the loop to unwind a cancelled turn to its closing events."""
