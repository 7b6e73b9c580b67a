"""What ``dsh -p`` prints as the session goes: the assistant's text streamed to stdout
(``text``), or each stored event as a JSON line (``stream-json``); notes, warnings and
tool activity to stderr. A reader of stdout that goes away ends the run, as SIGPIPE
ends a Unix tool (see :mod:`dsh.ui.headless`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from dsh.control_chars import printable
from dsh.llm import TextDelta
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    SessionEvent,
    ToolCall,
    ToolResult,
)
from dsh.session.cache_events import CacheIdle, PrefixChanged
from dsh.session.payloads import CommandDone, GrantsIgnored, LlmRetry, ModelRenamed, SessionMoved
from dsh.wire import dumps


class Printer:
    """Writes what the session does in the chosen format, as it happens.

    When stdout's reader goes away (``dsh -p … | head``), it stops writing, points
    stdout at /dev/null (so no flush fails later) and calls ``on_closed``: the run is
    cancelled, as a Unix tool stops on SIGPIPE, and the session stays resumable.
    """

    def __init__(
        self,
        output_format: str,
        out: TextIO,
        err: TextIO,
        on_closed: Callable[[], None] = lambda: None,
    ) -> None:
        self.format = output_format
        self.out = out
        self.err = err
        self.on_closed = on_closed
        self.closed = False
        self.session_id: str | None = None
        self.command_failed = False
        """A recorded slash command failed (its ``command/done`` says so)."""
        self._text_open = False

    def __call__(self, event: SessionEvent) -> None:
        """An event as it is logged: the text streams, notes are said. Its stream-json
        record waits until it is stored (:meth:`record`)."""
        if self.format == "text":
            self._text(event)
        if isinstance(event.data, CommandDone) and event.data.kind == "error":
            # A slash command given as the prompt failed: said once, whatever the format.
            self.command_failed = True
            self.end_line()
            self.note(f"dsh: {event.data.text}\n")
        if isinstance(
            event.data,
            GrantsIgnored | ModelRenamed | LlmRetry | SessionMoved | PrefixChanged | CacheIdle,
        ):
            # A warning for the person, whatever the format: stdout may be a program's.
            self.end_line()
            self.note(f"dsh: {event.data.notice()}\n")

    def record(self, event: SessionEvent) -> None:
        """A stored event's stream-json line."""
        if self.format == "stream-json":
            # Every record says whose it is, so a script can --resume what it started.
            record = event.to_dict()
            self.json_line({"sessionId": self.session_id, **record} if self.session_id else record)

    def records(self, events: Sequence[SessionEvent], since: int) -> None:
        """The stream-json lines of a stored batch, from seq ``since`` on."""
        for event in events:
            if event.seq >= since:
                self.record(event)

    def json_line(self, value: Any) -> None:
        """One JSON line; lone surrogates as their escapes, so it reads back the same."""
        self.write(dumps(value) + "\n")

    def write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.out.write(printable(text))
            self.out.flush()
        except BrokenPipeError:
            self.closed = True
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.out.fileno())
                os.close(devnull)
            self.on_closed()

    def note(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.err.write(printable(text))
            self.err.flush()

    def _text(self, event: SessionEvent) -> None:
        match event.data:
            case AssistantChunk(chunk=TextDelta(text=text)):
                self.write(text)
                self._text_open = True
            case AssistantMessageData():
                self.end_line()
            case ToolCall(name=name, arguments=arguments):
                self.end_line()
                brief = arguments if len(arguments) <= 120 else arguments[:117] + "..."
                self.note(f"[tool] {name} {brief}\n")
            case ToolResult(message=message, error=error) if error is not None:
                texts = [b.text for b in message.result.content if hasattr(b, "text")]
                first = (texts[0].splitlines() or [""])[0] if texts else ""
                self.note(f"[tool] {error.name} failed ({error.code}): {first[:200]}\n")

    def end_line(self) -> None:
        if self._text_open:
            self.write("\n")
            self._text_open = False
