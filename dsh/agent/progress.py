"""Progress of running tool calls, into the session log at a pace it can bear.

A tool reports progress through ``ToolContext.progress`` (an MCP server's
``notifications/progress``, say). Each report becomes a ``tool/progress`` event, which
the front ends fold into the call's card. The reports come from the tool's side (an
MCP server may send thousands a second), so :class:`ProgressLog` logs at most one
per call every :data:`INTERVAL` seconds: a report that comes sooner waits, replaced
by any newer one, and is logged when the interval is up, unless the call has ended
by then. The last word before a result is therefore never more than an interval
late, and a flood costs a handful of events.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from dsh.llm import CallId

INTERVAL = 0.25
"""Seconds between two logged reports of one call."""
MAX_CHARS = 300
"""A report is cut to this many characters: it is one line on a card."""

log = logging.getLogger(__name__)


@dataclass
class _Call:
    last: float = float("-inf")
    pending: str | None = None
    timer: asyncio.TimerHandle | None = None


class ProgressLog:
    """Owns the pacing of every running call's reports; ``append(call_id, text)``
    logs one. :meth:`end` a call once its result is logged."""

    def __init__(
        self,
        append: Callable[[CallId, str], None],
        *,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._append = append
        self._interval = interval
        self._clock = clock
        self._calls: dict[CallId, _Call] = {}

    def reporter(self, call_id: CallId) -> Callable[[str], None]:
        """The ``progress`` callable for one call's context. A tool may call it from a
        thread of its own (work done in ``asyncio.to_thread``): the report is then
        handed to the loop, which alone writes the log."""
        self._calls.setdefault(call_id, _Call())
        loop = asyncio.get_running_loop()

        def report(text: str) -> None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                self.report(call_id, text)
            else:
                loop.call_soon_threadsafe(self.report, call_id, text)

        return report

    def report(self, call_id: CallId, text: str) -> None:
        call = self._calls.get(call_id)
        if call is None:  # the call has ended: a late report is dropped
            return
        line = " ".join(text.split())[:MAX_CHARS]  # the front ends make it safe to show
        if not line:
            return
        wait = call.last + self._interval - self._clock()
        if wait <= 0 and call.timer is None:
            self._log(call_id, call, line)
            return
        call.pending = line
        if call.timer is None:
            loop = asyncio.get_running_loop()
            call.timer = loop.call_later(max(wait, 0.0), self._flush, call_id)

    def end(self, call_id: CallId) -> None:
        """The call's result is in: what is still waiting is dropped (the card shows
        the result now), and so is anything reported later."""
        call = self._calls.pop(call_id, None)
        if call is not None and call.timer is not None:
            call.timer.cancel()

    def close(self) -> None:
        for call_id in list(self._calls):
            self.end(call_id)

    def _flush(self, call_id: CallId) -> None:
        call = self._calls.get(call_id)
        if call is None:
            return
        call.timer = None
        if call.pending is not None:
            line, call.pending = call.pending, None
            self._log(call_id, call, line)

    def _log(self, call_id: CallId, call: _Call, line: str) -> None:
        call.last = self._clock()
        try:
            self._append(call_id, line)
        except Exception:  # progress is a courtesy: it never fails the call
            log.warning("tool progress not logged", exc_info=True)
