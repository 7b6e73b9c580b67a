"""Plain mode's transcript: session events in, lines out, nothing ever redrawn.

The printer feeds every event of the session on screen to a
:class:`~dsh.ui.entries.TranscriptFold` (as the Textual app does) and prints each
entry once it has something final to say, so the output reads well in a log, a
dumb terminal or a screen reader:

- the person's own messages are not echoed (they were typed);
- an answer is printed line by line as it streams in (a line once its newline
  arrives, the last one when the answer ends): printing half-lines would fight
  the prompt that stays open below the output;
- reasoning is collapsed to one dim ``thinking… (N chars)`` line when it ends;
- a tool call prints its header when it starts, and its header again with its
  presentation (at most 20 lines) when it ends;
- notices, what plugins show for their events (at most 20 lines) and each turn's
  footer are printed as they come; plugin context is not.

A resumed session's log is printed compactly first (:meth:`replay`): prompts,
answers, tool headers, notices, plugins' views and footers.
"""

from __future__ import annotations

import logging

from rich.console import Console
from rich.text import Text

from dsh.session import SessionEvent
from dsh.tools.presentation import TextView
from dsh.ui.entries import (
    AnswerEntry,
    Entry,
    NoticeEntry,
    ReasoningEntry,
    StreamedEntry,
    ToolEntry,
    TranscriptFold,
    TurnFooter,
    UserEntry,
    ViewEntry,
)
from dsh.ui.render import (
    Indented,
    ToolLookup,
    generic_title,
    render_footer,
    render_notice,
    render_presentation,
    tool_header,
    tool_presentation,
    visible_view,
)

log = logging.getLogger(__name__)

ENDED = frozenset({"done", "failed", "denied", "cancelled"})
MAX_LINES = 20


class TranscriptPrinter:
    def __init__(self, console: Console, tools: ToolLookup | None, fold: TranscriptFold) -> None:
        self.console = console
        self.tools = tools
        self.fold = fold
        self._consumed: dict[str, int] = {}
        """Characters of a streamed entry already printed or held in ``_partial``."""
        self._partial: dict[str, str] = {}
        self._finished: set[str] = set()
        self._tools: dict[str, str] = {}
        """A tool entry's key: ``started`` or ``ended`` once that was printed."""

    # ------------------------------------------------------------------ replay

    def replay(self, events: list[SessionEvent]) -> None:
        """Fold stored events and print the transcript they make, compactly."""
        for event in events:
            self.fold.apply(event)
        for entry in self.fold.entries:
            match entry:
                case UserEntry(text=text):
                    self._print(Text(f"> {text}", style="bold"))
                case AnswerEntry(text=text) if text:
                    self._print(Text(text))
                case ReasoningEntry(text=text) if text:
                    self._print(_thinking(text))
                case ToolEntry():
                    self._print(tool_header(entry))
                case NoticeEntry():
                    self._print(render_notice(entry))
                case ViewEntry():
                    self._print(_plugin_view(entry))
                case TurnFooter():
                    self._print(render_footer(entry))
            self._forget_live(entry)

    def _forget_live(self, entry: Entry) -> None:
        """Count a replayed entry as printed, should a later event touch it."""
        if isinstance(entry, StreamedEntry):
            self._consumed[entry.key] = len(entry.text)
            if entry.done:
                self._finished.add(entry.key)
        elif isinstance(entry, ToolEntry):
            self._tools[entry.key] = "ended" if entry.status in ENDED else "started"

    # ------------------------------------------------------------------ live

    def __call__(self, event: SessionEvent) -> None:
        """A session subscriber: must never raise into the agent that logged the event."""
        try:
            for entry in self.fold.apply(event):
                self._live(entry)
        except Exception:
            log.exception("plain mode could not print event %s", event.seq)

    def _live(self, entry: Entry) -> None:
        match entry:
            case AnswerEntry():
                self._stream(entry)
            case ReasoningEntry():
                if entry.done:
                    self._finish_reasoning(entry)
            case ToolEntry():
                self._tool(entry)
            case NoticeEntry() if not entry.key.startswith("command:"):
                # a command's own line was typed, and its output shown by the host
                self.flush()
                self._print(render_notice(entry))
            case NoticeEntry(level="error"):
                # a recorded command failed: what went wrong is in its notice, once
                self.flush()
                _, _, failure = entry.text.partition("\n")
                self._print(render_notice(NoticeEntry(entry.key, entry.seq, "error", failure)))
            case ViewEntry():
                self.flush()
                self._print(_plugin_view(entry))
            case TurnFooter():
                self.flush(final=True)
                self._print(render_footer(entry))

    def _stream(self, entry: AnswerEntry, *, done: bool = False) -> None:
        key = entry.key
        if key in self._finished:
            return
        if key not in self._consumed:
            self._close_reasoning()  # its end may be logged after the answer began
        text = entry.text
        consumed = self._consumed.get(key, 0)
        pending = self._partial.get(key, "") + text[consumed:]
        self._consumed[key] = max(consumed, len(text))
        if entry.done or done:
            self._partial.pop(key, None)
            self._finished.add(key)
            if pending.strip("\n"):
                self._print(Text(pending.rstrip("\n")))
            return
        if "\n" in pending:
            lines, pending = pending.rsplit("\n", 1)
            self._print(Text(lines))
        self._partial[key] = pending

    def _finish_reasoning(self, entry: StreamedEntry) -> None:
        if entry.key in self._finished:
            return
        self._finished.add(entry.key)
        if entry.text:
            self._print(_thinking(entry.text))

    def _close_reasoning(self) -> None:
        for entry in self.fold.entries[-8:]:
            if isinstance(entry, ReasoningEntry) and entry.key not in self._finished:
                self._finish_reasoning(entry)

    def flush(self, *, final: bool = False) -> None:
        """Print what an open answer holds back before other output. ``final`` (at the
        end of a turn) also ends every open block: a cancelled turn leaves them open."""
        for key, pending in list(self._partial.items()):
            if pending and not final:
                self._print(Text(pending))
                self._partial[key] = ""
        if not final:
            self._close_reasoning()
            return
        for entry in self.fold.entries[-8:]:
            if isinstance(entry, AnswerEntry):
                self._stream(entry, done=True)
            elif isinstance(entry, ReasoningEntry):
                self._finish_reasoning(entry)

    def _tool(self, entry: ToolEntry) -> None:
        printed = self._tools.get(entry.key)
        if printed == "ended":
            return
        self.flush()
        if entry.status in ENDED:
            self._tools[entry.key] = "ended"
            self._print(tool_header(entry))
            view = tool_presentation(self.tools, entry)
            generic = isinstance(view, TextView) and view.title == generic_title(entry)
            if generic and not (isinstance(view, TextView) and view.body):
                return
            body = render_presentation(view, max_lines=MAX_LINES, show_title=not generic)
            self._print(Indented(body))
        elif printed is None:
            self._tools[entry.key] = "started"
            self._print(tool_header(entry))

    def _print(self, renderable: Text | Indented) -> None:
        self.console.print(renderable, soft_wrap=isinstance(renderable, Text))


def _plugin_view(entry: ViewEntry) -> Indented:
    """Under the notices' marks, without trailing blanks."""
    return Indented(render_presentation(visible_view(entry.view), max_lines=MAX_LINES))


def _thinking(text: str) -> Text:
    return Text(f"thinking… ({len(text):,} chars)", style="dim italic")
