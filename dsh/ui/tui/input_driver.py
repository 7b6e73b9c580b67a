"""Textual's terminal driver, reading the keys as dsh documents them.

Two differences from :class:`textual.drivers.linux_driver.LinuxDriver`:

- what was typed before the app started (:mod:`dsh.ui.tui.early_terminal`) is read
  first, through the same parser as what follows, so a key split across the two
  still parses as one and every key keeps its place;
- Alt+Enter (``ESC CR``) is the key ``alt+enter``, a new line: Textual's parser drops
  the Alt of a key it names (Enter, Tab, Backspace...), so it read as Enter and sent.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from collections.abc import Iterable
from typing import Any

from textual import events
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

from dsh.ui.tui.early_terminal import EarlyTerminal


class DshParser(XTermParser):
    def _sequence_to_key_events(self, sequence: str, alt: bool = False) -> Iterable[events.Key]:
        # Whole, as a sequence read at once, or its CR after a lone ESC.
        if sequence == "\x1b\r" or (alt and sequence == "\r"):
            return [events.Key("alt+enter", None)]
        return super()._sequence_to_key_events(sequence, alt)


class DshDriver(LinuxDriver):
    typed_early: bytes = b""
    """Read before the terminal: set on a subclass made by :func:`driver_class`."""
    cooked: list[Any] | None = None
    """The terminal's mode before dsh took it (Textual saw only the raw mode dsh set)."""

    def start_application_mode(self) -> None:
        super().start_application_mode()  # type: ignore[no-untyped-call]
        # What Textual puts back when it stops or suspends is the shell's mode.
        if self.cooked is not None:
            self.attrs_before = self.cooked

    def run_input_thread(self) -> None:
        # Textual's own loop (textual 8.2), with the early bytes first and dsh's parser.
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        fileno = self.fileno
        parser = DshParser(self._debug)
        decode = getincrementaldecoder("utf-8")(errors="replace").decode

        def dispatch(text: str) -> None:
            for event in parser.feed(text):
                self.process_message(event)

        def process(ready: list[tuple[Any, int]], final: bool = False) -> None:
            for index, (_key, mask) in enumerate(ready):
                if mask & selectors.EVENT_READ:
                    data = os.read(fileno, 4096)
                    if not data:  # stdin piped and ended
                        break
                    dispatch(decode(data, final=final and index == len(ready) - 1))
            for event in parser.tick():
                self.process_message(event)

        try:
            if self.typed_early:
                dispatch(decode(self.typed_early))
            while not self.exit_event.is_set():
                process(selector.select(0.1))
            selector.unregister(self.fileno)
            process(selector.select(0.1), final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except Exception:  # the parser's EOF at shutdown, as Textual's loop ignores
                pass


def driver_class(early: EarlyTerminal | None) -> type[DshDriver]:
    """The driver, reading what was typed before the app (``early``) first."""
    if early is None:
        return DshDriver
    fields = {"typed_early": early.typed, "cooked": early.before}
    return type("DshDriver", (DshDriver,), fields)
