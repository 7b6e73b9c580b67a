"""Building many long-lived objects at once, with the cyclic garbage collector paused.

Loading a long session creates some 100,000 objects that all stay alive. The cyclic
collector is triggered by allocation counts, so while they are built it runs again
and again, each older generation walking everything made so far to free nothing: it
was 40-50 % of a 100,000-event load. Reference counting still frees what goes out of
scope meanwhile; only cycles wait until the collector is back on.

Pauses nest and may overlap across threads: the collector comes back when the last
one ends, and only if it was on when the first began.

Start-up is such a time too: importing dsh and its plugins builds some 75,000 objects
the collector tracks (modules, classes, their functions and schemas), nearly all
living until exit, and it walked them again and again: about a tenth of the CPU time
to ready. A
front end pauses it from its start (:func:`pause_for_start_up`) until its runtime is
up (:func:`start_up_done`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["collector_paused", "pause_for_start_up", "start_up_done"]

_lock = threading.Lock()
_pauses = 0
_was_enabled = False
_start_up: contextlib.AbstractContextManager[None] | None = None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


def pause_for_start_up() -> None:
    """Pause the collector until :func:`start_up_done` (once a process; a second call
    while paused does nothing)."""
    global _start_up
    if _start_up is None:
        pause = collector_paused()
        pause.__enter__()
        _start_up = pause


def start_up_done() -> None:
    """End the start-up pause, if one is on. What start-up built is moved out of the
    collector's sight (``gc.freeze``): it lives until exit, and walking it again at
    every full collection would only cost time. The code compiled meanwhile
    is kept for the next launch (:mod:`dsh.code_cache`)."""
    global _start_up
    from dsh import code_cache

    code_cache.save()
    pause, _start_up = _start_up, None
    if pause is not None:
        gc.freeze()
        pause.__exit__(None, None, None)
