"""The session picker: choose a session to resume, searching as you type.

A search input on top, an ``OptionList`` below (line-API: it paints only the visible
rows, so thousands of sessions cost nothing, unlike a ``ListView``). Sessions of the
current directory come first; each option shows the title (or the first prompt),
the age, the turns, the cost and, when it is another directory's, that directory.

Typing filters: titles, directories and ids of the listed sessions match at once,
and ``search(text)`` (full-text search of what was written; see
:func:`catalog_search`) runs in a worker once typing pauses for
:data:`SEARCH_DELAY` seconds. Enter resumes the highlighted session (its id is the
result), Esc closes (None).

Public API: ``SessionPicker(entries, cwd, search, *, search_delay=SEARCH_DELAY)``, a
``ModalScreen[str | None]``; ``Search``, the type of ``search`` (text → awaitable
entries); ``catalog_search(catalog, *, limit=SEARCH_LIMIT) -> Search``; the helpers
``here_first(entries, cwd)``, ``local_matches(entries, text)``,
``session_prompt(entry, cwd, now_ms)``, ``format_age(ms)``, ``short_path(path)``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from dsh.control_chars import visible
from dsh.session.catalog import Catalog, CatalogEntry
from dsh.ui.entries import format_cost

SEARCH_DELAY = 0.15
SEARCH_LIMIT = 50

Search = Callable[[str], Awaitable[Sequence[CatalogEntry]]]


class SessionPicker(ModalScreen[str | None]):
    DEFAULT_CSS = """
    SessionPicker { align: center middle; }
    SessionPicker #dialog {
        width: 90%; max-width: 120; height: 80%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    SessionPicker #title { text-style: bold; }
    SessionPicker #sessions { height: 1fr; margin: 1 0 0 0; }
    SessionPicker #hint { color: $text-muted; }
    """
    AUTO_FOCUS = "#search"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", show=False),
        Binding("down", "move(1)", show=False),
        Binding("up", "move(-1)", show=False),
        Binding("pagedown", "move(10)", show=False),
        Binding("pageup", "move(-10)", show=False),
    ]

    def __init__(
        self,
        entries: Sequence[CatalogEntry],
        cwd: str,
        search: Search,
        *,
        search_delay: float = SEARCH_DELAY,
    ) -> None:
        super().__init__()
        self.entries = list(entries)
        self.cwd = cwd
        self.search = search
        self.search_delay = search_delay
        self.shown: list[CatalogEntry] = []
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Resume a session", id="title")
            yield Input(placeholder="Search titles and conversations…", id="search")
            yield OptionList(id="sessions")
            yield Static("↑↓ choose · Enter: resume · Esc: close", id="hint")

    def on_mount(self) -> None:
        self.show(self.entries)

    # ------------------------------------------------------------------ listing

    def show(self, entries: Sequence[CatalogEntry]) -> None:
        """List ``entries`` (this directory's first, otherwise in the given order)."""
        self.shown = here_first(entries, self.cwd)
        now_ms = now()
        options = self.query_one("#sessions", OptionList)
        options.set_options(
            Option(session_prompt(entry, self.cwd, now_ms), id=entry.id) for entry in self.shown
        )
        if self.shown:
            options.highlighted = 0
        else:
            options.add_option(Option(Text("no sessions found", style="dim"), disabled=True))

    def action_move(self, delta: int) -> None:
        options = self.query_one("#sessions", OptionList)
        if not self.shown:
            return
        current = options.highlighted if options.highlighted is not None else 0
        options.highlighted = max(0, min(len(self.shown) - 1, current + delta))

    # ------------------------------------------------------------------ searching

    @on(Input.Changed, "#search")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        text = event.value.strip()
        if not text:
            self.workers.cancel_group(self, "search")
            self.show(self.entries)
            return
        self.show(local_matches(self.entries, text))
        self._timer = self.set_timer(self.search_delay, lambda: self._search(text))

    @work(exclusive=True, group="search", exit_on_error=False)
    async def _search(self, text: str) -> None:
        try:
            found = await self.search(text)
        except Exception as error:  # a broken index must not take the app down
            self.query_one("#hint", Static).update(f"search failed: {error}")
            return
        if self.query_one("#search", Input).value.strip() != text:
            return  # typing went on; a newer search follows
        local = local_matches(self.entries, text)
        seen = {entry.id for entry in local}
        self.show([*local, *(entry for entry in found if entry.id not in seen)])

    # ------------------------------------------------------------------ choosing

    @on(Input.Submitted, "#search")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one("#sessions", OptionList)
        if self.shown:
            index = options.highlighted if options.highlighted is not None else 0
            self.dismiss(self.shown[index].id)

    @on(OptionList.OptionSelected, "#sessions")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.dismiss(event.option.id)

    def action_close(self) -> None:
        self.dismiss(None)


def now() -> int:
    """The time ages are counted to, in epoch milliseconds."""
    return int(time.time() * 1000)


def here_first(entries: Sequence[CatalogEntry], cwd: str) -> list[CatalogEntry]:
    """``entries`` with ``cwd``'s sessions first, each group in its given order."""
    here = [entry for entry in entries if entry.cwd == cwd]
    return here + [entry for entry in entries if entry.cwd != cwd]


def local_matches(entries: Sequence[CatalogEntry], text: str) -> list[CatalogEntry]:
    """Entries whose title, first prompt, directory or id holds every word of
    ``text`` (case-insensitively): instant, before the full-text search answers."""
    words = text.lower().split()
    return [
        entry
        for entry in entries
        if all(
            word
            in f"{entry.display_title}\n{entry.first_prompt or ''}\n{entry.cwd or ''}\n"
            f"{entry.id}".lower()
            for word in words
        )
    ]


def session_prompt(entry: CatalogEntry, cwd: str, now_ms: int) -> Text:
    """Two lines: the title; then age, turns, cost and (another's) directory."""
    title = visible(entry.display_title)
    text = Text(title, style="bold", no_wrap=True, overflow="ellipsis")
    facts = [format_age(now_ms - entry.updated_at)]
    facts.append(f"{entry.turns} turn" + ("" if entry.turns == 1 else "s"))
    if entry.cost is not None:
        facts.append(format_cost(entry.cost))
    if entry.cwd and entry.cwd != cwd:
        facts.append(visible(short_path(entry.cwd)))
    facts.append(entry.id[:8])
    text.append("\n  " + " · ".join(facts), style="dim")
    return text


def format_age(ms: int) -> str:
    seconds = max(0, ms) // 1000
    if seconds < 60:
        return "just now"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min ago"
    hours = minutes // 60
    if hours < 24:
        return f"{hours} h ago"
    days = hours // 24
    if days < 60:
        return f"{days} d ago"
    return f"{days // 30} mo ago" if days < 730 else f"{days // 365} y ago"


def short_path(path: str) -> str:
    home = str(Path.home())
    if path == home or path.startswith(home + "/"):
        return "~" + path[len(home) :]
    return path


def catalog_search(catalog: Catalog, *, limit: int = SEARCH_LIMIT) -> Search:
    """A picker ``search`` from the catalog's full-text search, which finds events
    (:class:`~dsh.session.catalog.SearchHit`): their sessions, best match first."""

    async def search(text: str) -> list[CatalogEntry]:
        hits = await catalog.search(text, limit=limit)
        found: list[CatalogEntry] = []
        seen: set[str] = set()
        for hit in hits:
            if hit.session_id in seen:
                continue
            seen.add(hit.session_id)
            entry = await catalog.get(hit.session_id)
            if entry is not None:
                found.append(entry)
        return found

    return search
