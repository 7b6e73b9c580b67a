"""Building many long-lived objects at once, with the cyclic garbage collector paused.

Loading a long session creates some 100,000 objects that all stay alive. The cyclic
collector is triggered by allocation counts, so while they are built it runs again
and again, each older generation walking everything made so far to free nothing: it
was 40-50 % of a 100,000-event load. Reference counting still frees what goes out of
scope meanwhile; only cycles wait until the collector is back on.

Pauses nest and may overlap across threads: the collector comes back when the last
one ends, and only if it was on when the first began.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["collector_paused"]

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


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
