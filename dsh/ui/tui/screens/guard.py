"""A short deaf spell for dialogs that open while the person is typing.

An approval or a question can open at any moment, often while the person is typing
their next prompt. Keys they meant for the prompt (a ``y``, an Enter) must not answer
a dialog they have not even seen: each dialog ignores its answering keys, Enter on
a button and clicks for :data:`GUARD_SECONDS` after it is mounted. The printable
characters among them are not lost either: the dialog hands them on in a
:class:`TypedEarly` message, and the app puts them back where they were typed.

Public API: ``KeyGuard(seconds=GUARD_SECONDS)`` with ``start()`` (call it in the
dialog's ``on_mount``), ``open`` (True once the time has passed) and ``catch(screen,
event)`` (call it from the dialog's ``on_key``); ``TypedEarly``; ``GUARD_SECONDS``.
"""

from __future__ import annotations

import time
from typing import Any

from textual import events
from textual.message import Message
from textual.screen import Screen

GUARD_SECONDS = 0.15


class TypedEarly(Message):
    """Characters typed while a guarded dialog was opening, meant for the prompt
    (``submit``: an Enter, which sends it)."""

    def __init__(self, text: str, submit: bool = False) -> None:
        super().__init__()
        self.text = text
        self.submit = submit


class KeyGuard:
    """Whether a dialog mounted ``seconds`` ago may act on input yet."""

    def __init__(self, seconds: float = GUARD_SECONDS) -> None:
        self.seconds = seconds
        self._since: float | None = None

    def start(self) -> None:
        self._since = time.monotonic()

    @property
    def open(self) -> bool:
        """True once the guard time has passed since :meth:`start`."""
        return self._since is not None and time.monotonic() - self._since >= self.seconds

    def catch(self, screen: Screen[Any], event: events.Key) -> None:
        """While guarded, a printable key goes to the app as :class:`TypedEarly`
        instead of to the dialog."""
        if self.open or not event.is_printable or not event.character:
            return
        event.stop()
        event.prevent_default()
        screen.app.post_message(TypedEarly(event.character))
