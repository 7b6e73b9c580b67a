"""Keys meant for the prompt must not answer a dialog; keys meant for the dialog must.

An approval or a question can open at any moment, often while the person is typing
their next prompt. Two mistakes are possible, and the guard avoids both:

- a key the person typed for the prompt (the tail of a sentence with a ``y`` in it,
  an Enter) answering a dialog they have not even seen;
- a key the person pressed *for the dialog*, having seen it, landing in the prompt
  (as it did when the dialog ignored every key for its first moments, counted from
  when it was mounted rather than from when it was seen).

The rule: a key answers the dialog once the dialog is there (mounted, which its first
frame follows within a refresh: keys read before it cannot have been meant for it),
and only if it starts a new run of typing, that is the keyboard was quiet for at least
:data:`QUIET_SECONDS` before it. (The first frame itself is not a usable mark: the
app learns it was drawn only after it has been, and a key pressed at once on seeing it
can be read in between.) A person who sees a dialog appear stops, reads and
then answers: their key comes after a pause. A person typing a sentence across the
moment the dialog opens never pauses that long between keys, so the rest of their
sentence goes on into the prompt, however long it is. A dialog may also name its
answer keys: any other key is typing whatever the pause before it (the approval's
``y a n f``, Esc, Enter, Tab and the scrolling keys answer; an ``e`` does not). Once
a key has answered (or opened the dialog's input), the dialog takes every key after
it. A click counts the
same way: once the dialog is there, with the keyboard quiet.

Times are the times keys were read from the terminal (``event.time``), not when the
app got round to them, so a busy loop does not move a key from one side to the other.
The app notes every key it reads (:func:`note_key`, from its ``on_event``); printable
keys a dialog turns away go back to the prompt in a :class:`TypedEarly` message, so
nothing typed is lost.

Public API: ``KeyGuard(seconds=QUIET_SECONDS, answers=None)`` with ``start(screen)`` (call it in the
dialog's ``on_mount``), ``open`` (whether an answer would count now),
``starts_a_run(app, event)`` (the rule for one key) and ``catch(screen, event)`` (call it from the dialog's ``on_key``); ``note_key(app,
event)``; ``TypedEarly``; ``QUIET_SECONDS`` (and ``GUARD_SECONDS``, its old name).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from textual import events
from textual.app import App
from textual.message import Message
from textual.screen import Screen

QUIET_SECONDS = 0.5
"""How long the keyboard must have been quiet before a key that answers a dialog.
Longer than the gaps between the keys of someone typing (a fast typist's are under
0.2 s, a slow one's rarely over 0.4 s), shorter than anyone reads a dialog."""
GUARD_SECONDS = QUIET_SECONDS

_last_keys: weakref.WeakKeyDictionary[App[Any], list[float]] = weakref.WeakKeyDictionary()


KEYS_REMEMBERED = 256
"""How many of the latest key times are kept. Not two: the app notes keys as it reads
them, and may be many keys ahead of the dialog handling one (a burst, a busy loop), so
the key before the one being handled can be far back in what was noted."""


def note_key(app: App[Any], event: events.Key) -> None:
    """Remember when ``app`` read ``event`` (the latest :data:`KEYS_REMEMBERED`)."""
    times = _last_keys.setdefault(app, [])
    if event.time in times[-KEYS_REMEMBERED:]:
        return  # the same key, noted again on its way through
    times.append(event.time)
    del times[:-KEYS_REMEMBERED]


def _key_before(app: App[Any], event: events.Key) -> float | None:
    """When the key before ``event`` was read, if any was."""
    earlier = [t for t in _last_keys.get(app, ()) if t < event.time]
    return max(earlier) if earlier else None


class TypedEarly(Message):
    """Characters typed while a guarded dialog was opening, meant for the prompt
    (``submit``: an Enter, which sends it)."""

    def __init__(self, text: str, submit: bool = False) -> None:
        super().__init__()
        self.text = text
        self.submit = submit


class KeyGuard:
    """Whether a key or a click is meant for the dialog (see the module's rule)."""

    def __init__(
        self, seconds: float = QUIET_SECONDS, answers: frozenset[str] | None = None
    ) -> None:
        self.seconds = seconds
        self.answers = answers
        """The keys (by name) that answer the dialog; None: any key may. Another key
        never starts the dialog's turn: it is typing, and goes on into the prompt."""
        self._shown_at: float | None = None
        self._app: App[Any] | None = None
        self._armed = False

    def start(self, screen: Screen[Any]) -> None:
        """From the dialog's ``on_mount``: from now on a key may be meant for it."""
        self._app = screen.app
        self._shown_at = time.monotonic()

    @property
    def shown(self) -> bool:
        return self._shown_at is not None

    @property
    def open(self) -> bool:
        """Whether an answer counts now: one already has, or the dialog is drawn and
        the keyboard has been quiet long enough."""
        if self._armed:
            return True
        if self._shown_at is None:
            return False
        times = _last_keys.get(self._app) if self._app is not None else None
        last = max(times) if times else None
        return last is None or time.monotonic() - last >= self.seconds

    def starts_a_run(self, app: App[Any], event: events.Key) -> bool:
        """Whether ``event`` was read once the dialog was there, after the keyboard
        was quiet (the module's rule, whatever the key): a person who has seen it."""
        note_key(app, event)
        before = _key_before(app, event)
        drawn = self._shown_at is not None and event.time >= self._shown_at
        return drawn and (before is None or event.time - before >= self.seconds)

    def catch(self, screen: Screen[Any], event: events.Key) -> None:
        """Let ``event`` through to the dialog when it is meant for it (and from then
        on every key); else stop it, handing a printable one back to the prompt."""
        if self._armed:
            return
        app = screen.app
        answers = self.answers is None or event.key in self.answers
        if self.starts_a_run(app, event) and answers:
            self._armed = True
            return
        event.stop()
        event.prevent_default()
        if event.is_printable and event.character:
            app.post_message(TypedEarly(event.character))
