"""The terminal in the mode the TUI reads it in, from dsh's first moments.

Until a program changes it, a terminal is in the line discipline's "cooked" mode: it
echoes, and it turns the CR of Enter into LF, which Textual then reads as Ctrl+J.
Textual sets its raw mode only once the app starts, a second or so after exec on a
cold start, so an Enter typed in that time arrived as a new line and nothing was
sent. :func:`take_terminal` sets that raw mode first thing (before the heavy
imports), takes what was typed before it, and gives CR back to each LF in it: a LF
that arrived in cooked mode was an Enter far more often than a Ctrl+J (the two are
one byte by then). :mod:`dsh.ui.tui.input_driver` reads those bytes before the rest.

Only ``os``, ``select`` and ``termios`` here: this runs before anything else loads.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from dataclasses import dataclass
from typing import Any

try:
    import termios
except ImportError:  # no terminals to set up (Windows)
    termios = None  # type: ignore[assignment]


@dataclass
class EarlyTerminal:
    """The terminal taken into raw mode before the app started."""

    fd: int
    before: list[Any]
    """The mode it was in, put back by :meth:`restore` (Textual, which saw only the
    raw mode, puts that back when it stops)."""
    typed: bytes
    """What was typed before raw mode, each Enter a CR again."""

    def restore(self) -> None:
        if termios is None:
            return
        # (a terminal gone, its window closed, has nothing to put back)
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.before)


def take_terminal() -> EarlyTerminal | None:
    """Raw mode now, as Textual will set it; None when stdin is no terminal."""
    if termios is None or sys.stdin is None:
        return None
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return None
        before = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):
        return None
    raw: list[Any] = [list(part) if isinstance(part, list) else part for part in before]
    # The flags Textual's LinuxDriver clears (start_application_mode), so that its
    # own later switch changes nothing.
    raw[0] &= ~(termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR)
    signals = 0 if os.environ.get("TEXTUAL_ALLOW_SIGNALS") else termios.ISIG
    raw[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN | signals)
    raw[6][termios.VMIN] = 1
    raw[6][termios.VTIME] = 0
    try:
        termios.tcsetattr(fd, termios.TCSANOW, raw)
    except termios.error:
        return None
    typed = _pending(fd)
    if before[0] & termios.ICRNL and not before[0] & termios.INLCR:
        typed = typed.replace(b"\n", b"\r")
    return EarlyTerminal(fd, before, typed)


def _pending(fd: int) -> bytes:
    """What the terminal holds unread (in cooked mode a line waited for its end;
    raw, it can all be read)."""
    chunks: list[bytes] = []
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
