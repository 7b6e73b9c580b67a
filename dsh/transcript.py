"""How a plugin's session events show in a transcript.

Every UI folds session events into transcript entries (:mod:`dsh.ui.entries`), live
or replayed from the log, so a resumed session looks as it did live. The core folds
its own event types. For a plugin's type, the fold first reads what its
:class:`~dsh.session.EventType` declares (the session's title, a paid model call),
then runs the *fold step* the plugin registered for it here. A step is a pure
function of the event and the transcript: it may add notices and views, say what
the agent is doing, update the context's size, and show a panel beside the prompt
while a turn runs. The TUI and plain mode render all of these alike, and every text
in them is made safe to show, so a plugin defines its look once::

    def show_pin(event: SessionEvent, transcript: Transcript) -> None:
        transcript.notice(event, "info", f"Pinned: {event.data.note}")

    def vocabulary(ctx: Context) -> None:
        register_events(ctx, PINNED)
        register_entries(ctx, "notes/pinned", show_pin)

A step sees only events whose payload is its type's model: while the plugin is not
loaded its events stay opaque, and show nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from dsh.session.events import Owner, SessionEvent, is_core_type
from dsh.tools.presentation import Presentation

NoticeLevel = Literal["info", "warning", "error"]


class Transcript(Protocol):
    """What a fold step may do to the transcript it is folded into."""

    def notice(
        self, event: SessionEvent, level: NoticeLevel, text: str, *, key: str | None = None
    ) -> None:
        """Add a line to the transcript. With a ``key`` of the plugin's choosing (kept
        apart from other namespaces' keys: ``notes/pinned`` and ``notes/unpinned``
        share one), a later call with the same key, from this event or a later one,
        changes that line instead of adding one."""

    def view(self, event: SessionEvent, view: Presentation, *, key: str | None = None) -> None:
        """Add an entry that shows ``view``, rendered as tool cards render theirs;
        ``key`` as for :meth:`notice`."""

    def set_activity(self, activity: str) -> None:
        """What the agent is doing, for the status line: ``idle`` and ``thinking`` are
        the core's words; a plugin adds its own (``summarising``)."""

    def set_context_tokens(self, tokens: int) -> None:
        """The context's size now, until the next request reports the real figure."""

    def set_panel(self, name: str, view: Presentation | None) -> None:
        """Show ``view`` beside the prompt while a turn runs, or (None) take it away.
        Panels are cleared when a turn starts."""


FoldStep = Callable[[SessionEvent, Transcript], None]


_steps: dict[str, FoldStep] = {}
_holders: dict[str, int] = {}


def register_fold_step(event_type: str, step: FoldStep) -> Callable[[], None]:
    """Fold events of ``event_type`` with ``step``; returns the function that takes it
    away. The same step registered again only adds a holder (two runtimes in one
    process); another step for the same type is refused, as is a core type."""
    if is_core_type(event_type):
        raise ValueError(f"{event_type!r} is a core event type: the core folds it")
    known = _steps.get(event_type)
    if known is not None and known is not step:
        raise ValueError(f"{event_type!r} already has a fold step")
    _steps[event_type] = step
    _holders[event_type] = _holders.get(event_type, 0) + 1
    held = True

    def unregister() -> None:
        nonlocal held
        if not held or _steps.get(event_type) is not step:
            return
        held = False
        _holders[event_type] -= 1
        if not _holders[event_type]:
            del _steps[event_type], _holders[event_type]

    return unregister


def register_entries(owner: Owner, event_type: str, step: FoldStep) -> None:
    """Fold events of ``event_type`` with ``step`` for as long as ``owner`` (a plugin's
    context) lives: how a plugin says how its events show, from its ``vocabulary``."""
    owner.effect(lambda: register_fold_step(event_type, step))


def fold_step(event_type: str) -> FoldStep | None:
    return _steps.get(event_type)
