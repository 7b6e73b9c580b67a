"""The transcript: a window onto the session's entries, newest at the bottom.

Every entry comes from :class:`~dsh.ui.entries.TranscriptFold`, which folds session
events, so a resumed session looks exactly as it did live. Each entry is one
widget where possible (a tool card is a single ``Static`` that redraws itself on
click), and only the newest :attr:`Transcript.WINDOW` entries are mounted: older
ones are paged back in when the view reaches the top, and the oldest are unmounted
again as new ones arrive while the view follows the bottom. That keeps the widget
count, and so the cost of each layout, flat after hours of work.

Updates are coalesced: :meth:`Transcript.take` only notes which entries changed;
one callback per batch of events builds and refreshes their widgets.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, Protocol, cast

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widget import Widget
from textual.widgets import Static

from dsh.bulk import collector_paused
from dsh.tools.presentation import AgentView, Presentation, TextView
from dsh.ui.entries import (
    AnswerEntry,
    Entry,
    NoticeEntry,
    ReasoningEntry,
    ToolEntry,
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
from dsh.ui.tui.selecting import SelectByLine
from dsh.ui.tui.streaming import AnswerView

if TYPE_CHECKING:
    from dsh.ui.entries import TranscriptFold

SPINNER = "◐◓◑◒"
AGENT_HINT = "Ctrl+Up to this card, then Enter: its transcript (or /agents)"
CARD_LINES = 8
"""Lines of a tool's result shown before the card is expanded."""


class EntryView(Protocol):
    """What every entry's widget does: show its entry again after it changed."""

    entry: Entry

    def sync(self) -> None: ...


class UserView(SelectByLine, Static):
    DEFAULT_CSS = """
    UserView { margin: 1 0 0 0; padding: 0 1; border-left: thick $primary;
        background: $boost; }
    UserView.steering { border-left: thick $accent; }
    """

    def __init__(self, entry: UserEntry) -> None:
        super().__init__(Text(entry.text), classes="steering" if entry.steering else "")
        self.entry = entry

    def sync(self) -> None:
        pass


class NoticeView(SelectByLine, Static):
    DEFAULT_CSS = "NoticeView { padding: 0 1; }"

    def __init__(self, entry: NoticeEntry) -> None:
        super().__init__(render_notice(entry))
        self.entry = entry

    def sync(self) -> None:
        assert isinstance(self.entry, NoticeEntry)
        self.update(render_notice(self.entry))


class PluginView(SelectByLine, Static):
    """What a plugin's fold step shows for one of its events."""

    DEFAULT_CSS = "PluginView { padding: 0 1; }"

    def __init__(self, entry: ViewEntry) -> None:
        super().__init__(self._rendered(entry))
        self.entry = entry

    @staticmethod
    def _rendered(entry: ViewEntry) -> RenderableType:
        return render_presentation(visible_view(entry.view), max_lines=CARD_LINES)

    def sync(self) -> None:
        assert isinstance(self.entry, ViewEntry)
        self.update(self._rendered(self.entry))


class FooterView(SelectByLine, Static):
    DEFAULT_CSS = "FooterView { padding: 0 1; color: $text-muted; }"

    def __init__(self, entry: TurnFooter) -> None:
        super().__init__(render_footer(entry))
        self.entry = entry

    def sync(self) -> None:
        assert isinstance(self.entry, TurnFooter)
        self.update(render_footer(self.entry))


class ReasoningView(SelectByLine, Static):
    """Reasoning, dimmed: one line while collapsed (click to read it all)."""

    DEFAULT_CSS = """
    ReasoningView { padding: 0 1; color: $text-muted; text-style: italic; }
    ReasoningView:hover { background: $boost; }
    ReasoningView.-cursor { background: $boost; border-left: thick $accent; }
    """

    def __init__(self, entry: ReasoningEntry) -> None:
        super().__init__()
        self.entry = entry
        self.expanded = False
        self._shown: tuple[int, bool, bool] | None = None

    def on_mount(self) -> None:
        self.sync()

    def sync(self) -> None:
        assert isinstance(self.entry, ReasoningEntry)
        text = self.entry.text
        shown = (len(text), self.expanded, self.entry.done)
        if shown == self._shown:
            return
        self._shown = shown
        label = "thought" if self.entry.done else "thinking…"
        if self.expanded:
            self.update(Text.assemble((f"▾ {label}\n", "bold"), text))
        else:
            self.update(Text(f"▸ {label} ({len(text):,} chars)"))

    def on_click(self, event: events.Click) -> None:
        self.expanded = not self.expanded
        self.sync()


class ToolCard(SelectByLine, Static):
    """A tool call: a header with its status and time, and its plugin's view of the
    result (cut to :data:`CARD_LINES` lines until clicked)."""

    DEFAULT_CSS = """
    ToolCard { padding: 0 1; margin: 1 0 0 0; }
    ToolCard:hover { background: $boost; }
    ToolCard.failed { border-left: thick $error; }
    ToolCard.awaiting { border-left: thick $warning; }
    ToolCard.-cursor { background: $boost; border-left: thick $accent; }
    """

    def __init__(self, entry: ToolEntry, tools: ToolLookup | None) -> None:
        super().__init__()
        self.entry = entry
        self.tools = tools
        self.expanded = False
        self._body: RenderableType | None = None
        self._body_for: tuple[str, bool] | None = None
        self._view: Presentation | None = None
        self._frame = 0

    def on_mount(self) -> None:
        self.sync()

    @property
    def running(self) -> bool:
        assert isinstance(self.entry, ToolEntry)
        return self.entry.status in ("running", "awaiting-approval")

    def tick(self) -> None:
        """Advance the spinner and the elapsed time of a running call."""
        self._frame += 1
        self.sync()

    def sync(self) -> None:
        entry = self.entry
        assert isinstance(entry, ToolEntry)
        self.set_class(entry.is_error, "failed")
        self.set_class(entry.status == "awaiting-approval", "awaiting")
        header = tool_header(
            entry, int(time.time() * 1000), spinner=SPINNER[self._frame % len(SPINNER)]
        )
        body = self._render_body()
        self.update(header if body is None else Group(header, Indented(body)))

    def _render_body(self) -> RenderableType | None:
        entry = self.entry
        assert isinstance(entry, ToolEntry)
        if self.running:
            return Text(entry.progress, style="dim") if entry.progress else None
        key = (entry.status, self.expanded)
        if self._body_for != key:  # a presentation can be costly: once per change
            self._body_for = key
            view = tool_presentation(self.tools, entry)
            self._view = view
            generic = isinstance(view, TextView) and view.title == generic_title(entry)
            if generic and isinstance(view, TextView) and not view.body:
                self._body = None
            else:
                self._body = render_presentation(
                    view, expanded=self.expanded, max_lines=CARD_LINES, show_title=not generic
                )
                if isinstance(view, AgentView):
                    self._body = Group(self._body, Text(AGENT_HINT, style="dim italic"))
        return self._body

    def agent_view(self) -> AgentView | None:
        """The child agent's run this card shows, once the call ended with one."""
        if self.running:
            return None
        self._render_body()
        return self._view if isinstance(self._view, AgentView) else None

    def on_click(self, event: events.Click) -> None:
        self.expanded = not self.expanded
        self.sync()


def build_view(entry: Entry, tools: ToolLookup | None, *, live: bool) -> Widget | None:
    """The widget for ``entry``; None for entries the transcript does not show
    (context plugins entered for the model)."""
    match entry:
        case UserEntry():
            return UserView(entry)
        case AnswerEntry():
            return AnswerView(entry, live=live and not entry.done)
        case ReasoningEntry():
            return ReasoningView(entry)
        case ToolEntry():
            return ToolCard(entry, tools)
        case NoticeEntry():
            return NoticeView(entry)
        case ViewEntry():
            return PluginView(entry)
        case TurnFooter():
            return FooterView(entry)
    return None


class MoreAbove(SelectByLine, Static):
    DEFAULT_CSS = "MoreAbove { color: $text-muted; text-align: center; }"


class Transcript(VerticalScroll, can_focus=False):
    """The fold's entries, the newest :attr:`WINDOW` of them mounted."""

    DEFAULT_CSS = """
    Transcript { height: 1fr; scrollbar-size-vertical: 1; }
    """
    virtual_size = Reactive(Size(0, 0), layout=False, repaint=False)
    """Its content grows (an answer streaming in) in a layout that scrolls it and
    redraws it: the second layout Textual asks for after a change of size would only
    redraw it all again."""
    WINDOW: ClassVar[int] = 80
    PAGE: ClassVar[int] = 40
    OPENING: ClassVar[int] = 30
    """Entries mounted when a session opens: a screenful or two, so it opens fast;
    scrolling up pages in the rest."""

    def __init__(self, tools: ToolLookup | None = None) -> None:
        super().__init__(id="transcript")
        self.tools = tools
        self.fold: TranscriptFold | None = None
        self.views: dict[str, Widget] = {}
        self.first = 0
        """Index in the fold's entries of the oldest entry that has (or had) a view."""
        self._known: set[str] = set()
        self._pending: dict[str, Entry] = {}
        self._rewinds = 0
        """The fold's rewinds when it was last drawn whole."""
        self._local: list[Widget] = []
        self._scheduled = False
        self._more = MoreAbove("", id="more-above")
        self._paging = False
        self.cursor: ToolCard | ReasoningView | None = None
        """The card the card cursor is on (Ctrl+Up/Down), if any."""

    def on_mount(self) -> None:
        self._more.display = False
        self.mount(self._more)
        self.anchor()
        self.set_interval(0.25, self._tick_running)

    # ------------------------------------------------------------------ feeding

    async def show(self, fold: TranscriptFold) -> None:
        """Replace what is shown by the tail of ``fold`` (a session opened or resumed)."""
        self.fold = fold
        self._rewinds = fold.rewinds
        self._pending.clear()
        await self.remove_children([w for w in self.children if w is not self._more])
        self.views.clear()
        self._known = {entry.key for entry in fold.entries}
        self.first = max(0, len(fold.entries) - self.OPENING)
        views = self._build(fold.entries[self.first :], live=False)
        if views:
            await self.mount_all(views)
        self._update_more()
        self.scroll_end(animate=False)
        self.anchor()

    def take(self, changed: list[Entry]) -> None:
        """Entries an event added or changed: shown at the next refresh. After a
        rewind dropped entries, the transcript is drawn again from the fold."""
        fold = self.fold
        if fold is not None and fold.rewinds != self._rewinds:
            self._rewinds = fold.rewinds
            self.run_worker(self.show(fold), group="rewound", exclusive=True)
            return
        for entry in changed:
            self._pending[entry.key] = entry
        if changed and not self._scheduled:
            self._scheduled = True
            self.call_later(self._apply_pending)

    async def _apply_pending(self) -> None:
        self._scheduled = False
        pending = list(self._pending.values())
        self._pending.clear()
        fresh: list[Entry] = []
        for entry in pending:
            view = self.views.get(entry.key)
            if view is not None:
                cast(EntryView, view).sync()
            elif entry.key not in self._known:
                self._known.add(entry.key)
                fresh.append(entry)
        views = self._build(fresh, live=True)
        local, self._local = self._local, []
        if views or local:
            await self.mount_all([*views, *local])
            await self._trim()

    def _build(self, entries: list[Entry], *, live: bool) -> list[Widget]:
        views = []
        for entry in entries:
            view = build_view(entry, self.tools, live=live)
            if view is not None:
                self.views[entry.key] = view
                views.append(view)
        return views

    def add_local(self, widget: Widget) -> None:
        """Something the UI itself says (a command's output), below the rest: after
        the entries already on their way (a command's own line comes first)."""
        self._local.append(widget)
        if not self._scheduled:
            self._scheduled = True
            self.call_later(self._apply_pending)

    # ------------------------------------------------------------------ window

    async def _trim(self) -> None:
        """Unmount the oldest entries while the view follows the bottom."""
        children = [w for w in self.children if w is not self._more]
        extra = len(children) - 2 * self.WINDOW
        if extra <= 0 or not self.is_vertical_scroll_end or self.fold is None:
            return
        gone = children[:extra]
        keys = {id(w) for w in gone}
        for key, view in list(self.views.items()):
            if id(view) in keys:
                del self.views[key]
        await self.remove_children(gone)
        self.first = self._first_index()
        self._update_more()

    def _first_index(self) -> int:
        assert self.fold is not None
        for index in range(self.first, len(self.fold.entries)):
            if self.fold.entries[index].key in self.views:
                return index
        return len(self.fold.entries)

    async def page_up(self) -> bool:
        """Mount :attr:`PAGE` older entries above the oldest shown, keeping the view
        where it was. False when there are none."""
        if self.fold is None or self._paging:
            return False
        if self.first == 0 and not self._fold_older():
            return False
        self._paging = True
        try:
            start = max(0, self.first - self.PAGE)
            older = self.fold.entries[start : self.first]
            self.first = start
            views = self._build(older, live=False)
            if views:
                before = self.virtual_size.height
                await self.mount_all(views, after=self._more)
                self._update_more()
                self.call_after_refresh(self._keep_place, before)
            else:
                self._update_more()
            return True
        finally:
            self._paging = False

    def _fold_older(self) -> bool:
        """Fold the turns before the fold's first (a long session opened from its last
        turns) until some entries come; False when there are none left."""
        fold = self.fold
        while fold is not None and fold.older is not None:
            with collector_paused():
                older = fold.older()
            if not older:
                fold.older = None
                break
            fold.prepend(older)
            self.first += len(older)
            self._known.update(entry.key for entry in older)
            return True
        return False

    def scroll_to_key(self, where: str) -> None:
        """``page_up``, ``page_down``, ``top`` (paging in older entries) or ``bottom``
        (where it follows new output again): what the scrolling keys do, wherever
        this transcript is shown (the main screen, a session viewer)."""
        match where:
            case "page_up":
                if self.scroll_y <= 0:
                    self.run_worker(self.page_up(), group="page")
                self.scroll_page_up(animate=False)
            case "page_down":
                self.scroll_page_down(animate=False)
            case "top":
                self.run_worker(self.page_up(), group="page")
                self.scroll_home(animate=False)
            case _:
                self.scroll_end(animate=False)
                self.anchor()

    def _keep_place(self, before: int) -> None:
        self.scroll_to(y=self.virtual_size.height - before, animate=False)

    def _update_more(self) -> None:
        unfolded = self.fold is not None and self.fold.older is not None
        self._more.display = self.first > 0 or unfolded
        if self.first:
            noun = "entry" if self.first == 1 else "entries"
            more = " and earlier turns" if unfolded else ""
            self._more.update(
                f"▲ {self.first} earlier {noun}{more} (scroll up or PgUp to see them)"
            )
        elif unfolded:
            self._more.update("▲ earlier turns (scroll up or PgUp to see them)")

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        more = self.first > 0 or (self.fold is not None and self.fold.older is not None)
        if new <= 0 and more and old > new:
            self.call_later(self.page_up)

    def on_click(self, event: events.Click) -> None:
        if event.widget is self._more:
            self.call_later(self.page_up)

    # ------------------------------------------------------------------ card cursor

    def move_cursor(self, step: int) -> bool:
        """Put the card cursor on the next older (``step`` -1) or newer (1) tool card or
        thought: from none, on the newest. Past the newest it leaves the cards (False)."""
        cards = [w for w in self.children if isinstance(w, ToolCard | ReasoningView)]
        at = self.cursor
        if not cards or (at is None and step > 0):
            self.clear_cursor()
            return False
        if at is None or at not in cards:
            index = len(cards) - 1
        else:
            index = cards.index(at) + step
            if index >= len(cards):
                self.clear_cursor()
                return False
            if index < 0:
                index = 0
                if self.first > 0 or (self.fold is not None and self.fold.older is not None):
                    self.call_later(self.page_up)  # older cards, for the next press
        self.clear_cursor()
        self.cursor = cards[index]
        self.cursor.add_class("-cursor")
        self.scroll_to_widget(self.cursor, animate=False)
        return True

    def clear_cursor(self) -> None:
        if self.cursor is not None:
            self.cursor.remove_class("-cursor")
        self.cursor = None

    def on_card(self) -> bool:
        """Whether the cursor is on a card still shown."""
        return self.cursor is not None and self.cursor.is_attached

    def cursor_session(self) -> tuple[str, str] | None:
        """The session and title of the subagent's run under the card cursor, if the
        card shows one."""
        card = self.cursor
        if isinstance(card, ToolCard) and card.is_attached:
            view = card.agent_view()
            if view is not None:
                return view.session_id, view.title
        return None

    def open_cursor(self) -> None:
        """Open the card under the cursor in full, or close it."""
        card = self.cursor
        if isinstance(card, ToolCard | ReasoningView) and card.is_attached:
            card.expanded = not card.expanded
            card.sync()
            self.call_after_refresh(self.scroll_to_widget, card, animate=False)

    def toggle_details(self) -> None:
        """Open every mounted tool card and thought in full, or, when all are open,
        close them all."""
        views = [v for v in self.views.values() if isinstance(v, ToolCard | ReasoningView)]
        opened = not all(view.expanded for view in views)
        for view in views:
            view.expanded = opened
            view.sync()

    # ------------------------------------------------------------------ timers

    def _tick_running(self) -> None:
        for view in list(self.views.values())[-20:]:
            if isinstance(view, ToolCard) and view.running:
                view.tick()

    # ------------------------------------------------------------------ queries

    def answers(self) -> list[AnswerEntry]:
        """Every answer of the session, oldest first (mounted or not)."""
        if self.fold is None:
            return []
        return [e for e in self.fold.entries if isinstance(e, AnswerEntry) and e.text]
