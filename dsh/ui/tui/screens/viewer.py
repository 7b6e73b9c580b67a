"""A session's transcript, read-only: a subagent's run opened from its card or
``/agents``.

The same :class:`~dsh.ui.entries.TranscriptFold` and entry widgets as the main
transcript, fed from the stored events (read through the ``sessions`` service, never
written); a session whose agent lives in this process is read from memory and
followed as its events are appended, until the viewer closes. Nothing typed here
reaches an agent: the screen has nothing to type into, and its keys are its own
(Esc or q closes it, back to the prompt as it was left).

Public API: ``SessionViewer(session_id, *, sessions, agents, tools, cost, title)``, a
``Screen[None]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from dsh.bulk import collector_paused
from dsh.control_chars import visible
from dsh.ui.children import live_agent, run_status
from dsh.ui.entries import TranscriptFold
from dsh.ui.tui.transcript_view import Transcript

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.runtime import Runtime
    from dsh.session import Pricing, SessionEvent, SessionStore
    from dsh.ui.render import ToolLookup

HINT = "read-only · Esc or q: back · PgUp/PgDn scroll · Ctrl+Up/Down: cards, Enter opens one"


class SessionViewer(Screen[None]):
    DEFAULT_CSS = """
    SessionViewer { layout: vertical; }
    SessionViewer #viewer-title { padding: 0 1; background: $boost; text-style: bold; }
    SessionViewer #viewer-hint { padding: 0 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", show=False),
        Binding("q", "close", "Back", show=False),
        Binding("pageup", "scroll('page_up')", show=False),
        Binding("pagedown", "scroll('page_down')", show=False),
        Binding("home", "scroll('top')", show=False),
        Binding("end", "scroll('bottom')", show=False),
        Binding("ctrl+up,alt+up", "card(-1)", show=False),
        Binding("ctrl+down,alt+down", "card(1)", show=False),
        Binding("enter", "open_card", show=False),
    ]

    def __init__(
        self,
        session_id: str,
        *,
        sessions: SessionStore,
        agents: Sequence[Agent],
        tools: ToolLookup | None,
        cost: Pricing | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__()
        self.session_id = session_id
        self._sessions = sessions
        self._agents = agents
        self._cost = cost
        self._title = title
        self.transcript = Transcript(tools)
        self.fold: TranscriptFold | None = None
        self.live = False
        """Whether the session's agent lives in this process (its events followed)."""
        self._events: Sequence[SessionEvent] = ()
        """The session's events: the live session's own list while it is followed."""
        self._unsubscribe: Callable[[], None] | None = None
        self._header_scheduled = False
        self.loaded = False
        """The session's events are on screen (or it failed to load, said so)."""

    @classmethod
    def in_runtime(cls, runtime: Runtime, session_id: str, title: str | None) -> SessionViewer:
        """A viewer of one of ``runtime``'s sessions (followed while its agent runs)."""
        from dsh.agent.service import AGENTS
        from dsh.tools.service import TOOLS

        return cls(
            session_id,
            sessions=runtime.sessions,
            agents=runtime.root.get(AGENTS).list(),
            tools=runtime.root.get(TOOLS),
            cost=runtime.llm.cost,
            title=title,
        )

    def compose(self) -> ComposeResult:
        yield Static(self._heading("loading…"), id="viewer-title")
        yield self.transcript
        yield Static(HINT, id="viewer-hint")

    def on_mount(self) -> None:
        self.run_worker(self._load(), group="viewer-load", exclusive=True)

    async def _load(self) -> None:
        fold = TranscriptFold(cost=self._cost)
        self.fold = fold
        agent = live_agent(self._agents, self.session_id)
        if agent is not None:
            self.live = True
            self._events = agent.session.events
            events = list(self._events)
            with collector_paused():
                for event in events:
                    fold.apply(event)
            # No await between the copy and the subscription: no event falls between.
            self._unsubscribe = agent.session.subscribe(self._on_event, from_seq=len(events))
        else:
            try:
                resolved = await self._sessions.resolve(self.session_id)
                loaded = await self._sessions.persistence.inspect(resolved)  # only read
            except Exception as error:
                self.query_one("#viewer-title", Static).update(
                    self._heading(f"cannot be read: {error}")
                )
                self.loaded = True
                return
            self.session_id = resolved
            self._events = loaded.events
            with collector_paused():
                for event in loaded.events:
                    fold.apply(event)
        await self.transcript.show(fold)
        self._show_heading()
        self.loaded = True

    def _on_event(self, event: SessionEvent) -> None:
        """The followed session's subscriber: never raises into the agent that logged it."""
        fold = self.fold
        if fold is None:
            return
        try:
            self.transcript.take(fold.apply(event))
        except Exception:
            self.log.error(f"event {getattr(event, 'seq', '?')} could not be shown")
            return
        if not self._header_scheduled:
            self._header_scheduled = True
            self.call_later(self._show_heading)

    def _show_heading(self) -> None:
        self._header_scheduled = False
        if self.fold is None:
            return
        status = run_status(self._events, live=self.live)
        if self.live:
            status = f"{status} · following"
        self.query_one("#viewer-title", Static).update(self._heading(status))

    def _heading(self, status: str) -> Text:
        title = self._title or (self.fold.status.title if self.fold is not None else None)
        title = visible(title or "session", one_line=True)
        return Text.assemble(
            ("▸ ", "bold"),
            title,
            (f"  session {visible(self.session_id, one_line=True)}", "dim"),
            (f"  {visible(status, one_line=True)}", "dim"),
        )

    # ------------------------------------------------------------------ keys

    def action_close(self) -> None:
        self.stop_following()
        self.dismiss(None)

    def stop_following(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def on_unmount(self) -> None:
        self.stop_following()

    def action_scroll(self, where: str) -> None:
        self.transcript.scroll_to_key(where)

    def action_card(self, step: int) -> None:
        self.transcript.move_cursor(step)

    def action_open_card(self) -> None:
        """Enter: a card of a subagent's run of its own opens in another viewer; any
        other card opens in full, or closes."""
        opened = self.transcript.cursor_session()
        if opened is not None:
            opener = getattr(self.app, "view_session", None)
            if opener is not None:
                self.run_worker(opener(*opened), group="viewer-open")
                return
        self.transcript.open_cursor()
