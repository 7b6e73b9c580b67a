"""A short deaf spell for dialogs that open while the person is typing.

An approval or a question can open at any moment, often while the person is typing
their next prompt. Keys they meant for the prompt (a ``y``, an Enter) must not answer
a dialog they have not even seen: each dialog ignores its answering keys, Enter on
a button and clicks for :data:`GUARD_SECONDS` after it is mounted.

Public API: ``KeyGuard(seconds=GUARD_SECONDS)`` with ``start()`` (call it in the
dialog's ``on_mount``) and ``open`` (True once the time has passed); ``GUARD_SECONDS``.
"""

from __future__ import annotations

import time

GUARD_SECONDS = 0.15


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
