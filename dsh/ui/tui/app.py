"""The Textual app: ``dsh`` with no ``-p``.

One screen: the transcript (entries folded from the session's events), then the
plugins' panels, the queued messages, the completion menu, the prompt and the status
bar. Dialogs (approval, questions, the session picker, first-run setup) are
screens pushed on top.

Start-up paints the prompt first and accepts typing at once; the runtime (plugins,
providers, storage) loads behind it, its imports in a thread, and whatever was
sent meanwhile goes out when it is ready.

Start-up, opening and switching sessions, what is sent and the commands are the
:class:`~dsh.ui.session_controller.SessionController`'s; the app is its
:class:`~dsh.ui.user_interface.UserInterface`: it draws the session's events, reads
the keys, and shows the dialogs (approval, questions, trust, setup, busy session).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.notifications import SeverityLevel
from textual.widgets import Static

from dsh.bulk import collector_paused
from dsh.control_chars import visible
from dsh.ui.session_controller import SessionController, StartFailed
from dsh.ui.tui import dialogs
from dsh.ui.tui.attention import Attention
from dsh.ui.tui.prompt_input import CompletionMenu, PromptArea
from dsh.ui.tui.screens.guard import TypedEarly, note_key
from dsh.ui.tui.status import PanelsView, QueuePanel, StatusBar
from dsh.ui.user_interface import SessionChoice

if TYPE_CHECKING:
    from dsh.agent import Agent, AgentHandle, PasteResult
    from dsh.frontend import Kind
    from dsh.policy.permissions import PermissionMode
    from dsh.runtime import Runtime
    from dsh.session import SessionBusyError, SessionEvent
    from dsh.settings import Settings
    from dsh.tools.approval import ApprovalDecision, ApprovalRequest
    from dsh.tools.plan_review import PlanDecision, PlanReview
    from dsh.tools.questions import Answer, Question
    from dsh.ui.entries import TranscriptFold
    from dsh.ui.opening import BusyChoice
    from dsh.ui.rewinding import Preview, RewindChoice, RewindPick, TurnRow
    from dsh.ui.trusting import TrustAnswer, TrustQuestion
    from dsh.ui.tui.early_terminal import EarlyTerminal
    from dsh.ui.tui.transcript_view import Transcript

EXIT_OK, EXIT_FAILED = 0, 1
EXIT_TERMINATED = 143  # 128 + SIGTERM
QUIT_WINDOW_S = 1.0
"""On an idle, empty prompt a second Ctrl+C within this many seconds quits."""
CANCELLING = "cancelling…"
STREAMED = frozenset({"text-delta", "reasoning-delta"})
"""The ``assistant/chunk`` events that only add text to an answer or a thought."""
ESCAPE_WINDOW_S = 0.8
"""Esc twice within this long, nothing typed and no turn running: the rewind picker."""
CARD_HINT = "card: Enter opens · Esc leaves"
KEYS_HELP = (
    "Keys: Enter sends (while a turn runs it steers the turn) · Tab queues a follow-up"
    " while a turn runs · Ctrl+J, Alt+Enter, Shift+Enter or \\ then Enter adds a line ·"
    " Up/Down"
    " browse earlier prompts · Esc cancels the turn; Esc Esc (nothing typed) rewinds to"
    " before a turn (code, conversation or both) · Ctrl+R lists this session's prompts"
    " · Ctrl+C copies the selection, else stops the reply, else clears the"
    " prompt, else (twice) quits · PgUp/PgDn scroll, and Home/End on an empty prompt ·"
    " Ctrl+Up/Ctrl+Down move over tool cards and thoughts, Enter opens one (a subagent's"
    " card: its transcript, read-only; Esc or q comes back) · Ctrl+O"
    " opens or closes them all · Ctrl+V attaches an image from the clipboard, and a"
    " pasted image path attaches the image · Shift+Tab cycles the permission mode ·"
    " the mouse selects text (copied on release) and clicks a card open ·"
    " !command runs a shell command"
)
PREVIEW_MODULES = ("dsh.session", "dsh.ui.entries", "dsh.ui.tui.transcript_view")
"""What showing a stored session needs, a part of :data:`HEAVY_MODULES`."""
HEAVY_MODULES = (
    "dsh.runtime",
    "dsh.ui.entries",
    "dsh.ui.render",
    "dsh.ui.tui.transcript_view",
    "dsh.commands",
)


@dataclass(frozen=True, kw_only=True)
class TuiRequest(SessionChoice):
    """``dsh`` with no ``-p``: the session choices, and how the app looks and behaves."""

    theme: str | None = None
    draft: str | None = None
    """Text put in the prompt, not sent (the demo's first message)."""
    copy_on_select: bool = True
    """``[tui] copy_on_select``: a mouse selection is copied when the button is released."""
    notify: str = "auto"
    """``[tui] notify``: how an unfocused terminal is told dsh waits (see attention)."""


class DshApp(App[int]):
    TITLE = "dsh"
    CSS = """
    Screen { layout: vertical; }
    #body { height: 1fr; }
    #bottom { height: auto; }
    #loading { color: $text-muted; padding: 1 2; }
    """
    AUTO_FOCUS = "#prompt"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel_turn", "Cancel the turn", show=False),
        Binding("ctrl+c", "interrupt", "Clear / quit", show=False, priority=True),
        Binding("pageup", "scroll_transcript(-1)", show=False),
        Binding("pagedown", "scroll_transcript(1)", show=False),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("ctrl+o", "toggle_details", "Expand or collapse all", show=False),
    ]
    ENABLE_COMMAND_PALETTE = False
    kind: Kind = "tui"
    answers = True
    attended = True
    one_session = False

    def __init__(self, request: TuiRequest | None = None, *, runtime: Runtime | None = None):
        super().__init__()
        self.request = request or TuiRequest()
        self.controller = SessionController(self, self.request, runtime=runtime)
        self.controller.rewind_asker = TuiRewinder(self)
        self.cwd = self.controller.cwd
        self.fold: TranscriptFold | None = None
        self.transcript: Transcript | None = None
        self.exit_code = EXIT_OK
        self.end_reason = "exit"
        """Why the session on screen ends when the app does (``agent/session-end``):
        the person quit, unless dsh was ended with a signal."""
        self._unsubscribe: list[Callable[[], None]] = []
        self._early: list[tuple[str, bool]] = []
        """What was sent before the runtime was ready."""
        self._start_notes: list[tuple[str, str]] = []
        """Notices from start-up, shown once the transcript is."""
        self._refresh_scheduled = False
        self._last_ctrl_c = 0.0
        self._last_escape = 0.0
        self._selection_copied: tuple[str, object, float] = ("", None, 0.0)
        self._terminal_title = ""
        self.ready = asyncio.Event()
        self.attention = Attention(self, self.request.notify)
        from dsh.paths import dsh_home
        from dsh.ui.tui.theming import register_themes

        # Before the stylesheet is first parsed: it uses the themes' variables.
        self._theme_errors = register_themes(self, self.request.home or dsh_home())

    @property
    def runtime(self) -> Runtime | None:
        return self.controller.runtime

    @property
    def agent(self) -> Agent | None:
        """The agent of the session on screen."""
        return self.controller.agent

    @property
    def resumable(self) -> str | None:
        """The session last shown, once closed, if anything was said in it: named in
        the ``dsh --resume`` hint printed on exit."""
        return self.controller.resumable

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static("Starting dsh…", id="loading")
        with Vertical(id="bottom"):
            yield PanelsView(id="panels")
            yield QueuePanel(id="queue")
            menu = CompletionMenu(id="menu")
            yield menu
            yield PromptArea(menu)
            yield StatusBar()

    @property
    def prompt_area(self) -> PromptArea:
        return self.query_one(PromptArea)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one(StatusBar)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        from dsh.ui.tui.theming import variable_defaults

        return {**super().get_theme_variable_defaults(), **variable_defaults(self)}

    def on_mount(self) -> None:
        prompt = self.prompt_area
        prompt.root = self.cwd
        prompt.running = self._turn_running
        prompt.queued = lambda: self.fold is not None and bool(self.fold.queued)
        prompt.on_card = lambda: self.transcript is not None and self.transcript.on_card()
        prompt.paste_handler = self._pasted
        if self.request.draft:
            prompt.set_text(self.request.draft)
        self._themes()
        # After the first frame: the runtime's imports would compete with painting it.
        self.call_after_refresh(self.boot)

    def _themes(self) -> None:
        from dsh.ui.tui.theming import choose_theme

        for error in self._theme_errors:
            self.notify(error, severity="warning", title="Theme not loaded")
        problem = choose_theme(self, self.request.theme)
        if problem:
            self.notify(problem, severity="warning")

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's toast, its texts made safe to show: an error's message may quote
        what the model or a tool said (so it is not read as markup either, unless a
        caller says it holds only its own)."""
        super().notify(
            visible(message),
            title=visible(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    # ------------------------------------------------------------------ start-up

    @work(group="boot", exclusive=True)
    async def boot(self) -> None:
        # The runtime and the transcript import pydantic, httpx and the plugins:
        # in a thread, so that typing stays live meanwhile.
        request = self.request
        if self.runtime is None and request.resume and not request.pick:
            await asyncio.to_thread(_import_all, PREVIEW_MODULES)
            try:
                await self._preview(request.resume)
            except Exception as error:  # the real resume below says what is wrong
                self.log.warning(f"no preview of {request.resume}: {error}")
        await asyncio.to_thread(_import_all, HEAVY_MODULES)
        controller = self.controller
        try:
            await controller.start()
            await self._wire()
            import gc

            # The modules, the runtime and the app's own widgets live until exit: keep
            # the collector from walking them again and again (each full collection
            # took 50-150 ms while an answer streamed). Before the session opens, so
            # that what it shows is freed when another replaces it.
            gc.freeze()
            if not await controller.open_first(new_if_none=True):
                self.exit(EXIT_OK)  # Esc in the picker: back to the shell
                return
            for note, level in self._start_notes:
                self.show(note, level=level)
        except StartFailed as failed:
            self._fatal(str(failed))
            return
        except Exception as error:  # shown, never a traceback over the screen
            self._fatal(f"dsh could not start: {error}")
            raise
        self.ready.set()
        self.run_worker(self._show_sandbox(), group="sandbox", exclusive=True)
        early, self._early = self._early, []
        if self.request.prompt:
            early.insert(0, (self.request.prompt, False))
        for text, queue in early:
            await self.submit(text, queue=queue)

    async def _show_sandbox(self) -> None:
        """The sandbox on the status bar, and its warning the first time: learned once
        the app is ready, since the probe starts a bwrap (a message typed ahead goes
        out meanwhile; its commands wait for the same probe)."""
        try:
            status = await self.controller.sandbox_status()
        except Exception as error:  # a bug in the probe: said, never a traceback
            self.show(f"the sandbox's state is unknown: {error}", level="error")
            return
        self.status_bar.sandbox = status
        self.status_bar.show()

    async def _preview(self, session_id: str) -> None:
        """Show a stored session, read-only, while the runtime and its plugins load:
        a long session is on screen in half the time. Once the agent resumes it, the
        transcript is built again with costs and the plugins' tool views."""
        from dsh.llm import SessionId
        from dsh.session.jsonl import JsonlPersistence
        from dsh.session.session import Session
        from dsh.session.spend import Spend
        from dsh.session.store import make_persistence
        from dsh.ui.entries import TranscriptFold
        from dsh.ui.tui.transcript_window import fold_session

        settings = await self.controller.settings()
        persistence = make_persistence(settings.storage.backend, self.controller.home)
        wanted = SessionId(session_id)
        try:
            if not await persistence.exists(wanted):
                return  # a prefix: the catalog resolves it once the runtime is up
            # Through its snapshot when it has one: what the runtime reads next.
            peeked = None
            if isinstance(persistence, JsonlPersistence):
                peeked = await persistence.peek(wanted)
            loaded = None if peeked is not None else await persistence.inspect(wanted)
        finally:
            await persistence.close()
        with collector_paused():  # an entry for every event or so: see dsh.bulk
            if peeked is not None:
                header, opened = peeked
                state = opened.snapshot.state
                spent = Spend.from_json(state["spend"])
                for event in opened.log.recent:
                    spent.count(event, None)
                base = len(opened.log)
                fold = fold_session(Session.resumed(header, state, opened.log), None, (spent, base))
            else:
                assert loaded is not None
                fold = TranscriptFold()
                for event in loaded.events:
                    fold.apply(event)
        transcript = await self._mount_transcript(None)
        await transcript.show(fold)
        self.status_bar.fold = fold
        self.status_bar.note = "loading…"
        self.status_bar.show()
        said = f" · {fold.status.title}" if fold.status.title else ""
        self.show(f"Resumed session {session_id[:8]}{said}", level="info")

    async def _mount_transcript(self, tools: Any) -> Transcript:
        from dsh.ui.tui.transcript_view import Transcript

        if self.transcript is None:
            self.transcript = Transcript(tools)
            body = self.query_one("#body")
            await body.remove_children()
            await body.mount(self.transcript)
        self.transcript.tools = tools
        return self.transcript

    def _fatal(self, message: str) -> None:
        self.exit_code = EXIT_FAILED
        self.exit(EXIT_FAILED, return_code=EXIT_FAILED, message=message)

    async def _wire(self) -> None:
        from dsh.tools.approval import APPROVALS, PERMISSION_MODE_CHANGED
        from dsh.tools.service import TOOLS
        from dsh.ui.tui.commands import register_tui_commands

        controller = self.controller
        # Whoever changes the mode (Shift+Tab, /permissions, /plan, an approved plan),
        # the status bar shows it at once; the listener goes with the app's context.
        controller.ctx.on(PERMISSION_MODE_CHANGED, self._mode_changed)
        self._mode_changed(controller.ctx.get(APPROVALS).mode)
        controller.add_session_commands(KEYS_HELP, self._status_report)
        register_tui_commands(
            self,
            controller.commands,
            lambda: self.fold,
            view_session=self.view_session,
            home=controller.home,
        )
        self.prompt_area.commands = controller.commands.complete
        self.prompt_area.mentions = controller.mentions
        await self._mount_transcript(controller.ctx.get(TOOLS))

    async def set_up(self, home: Path, settings: Settings) -> bool | None:
        """First run with no key for the provider: the setup screen."""
        from dsh.credentials import CredentialStore
        from dsh.setup import configured_forms, needs_setup

        credentials = CredentialStore(home, self.cwd, project_env=settings.trusted)
        forms = configured_forms(settings) if self.request.plugin_configs is None else []
        if not needs_setup(settings, credentials, forms):
            return None
        from dsh.ui.tui.screens.setup import SetupScreen

        screen = SetupScreen(home, credentials, forms)
        choice = await dialogs.wait_screen(self, screen, None)
        return choice is not None

    def show_warning(self, text: str) -> None:
        self.show(f"{text[:1].upper()}{text[1:]}.", level="warning")

    def show_ignored(self, settings: Settings) -> None:
        from dsh.ui.trusting import ignored_summary

        summary = ignored_summary(settings)
        if summary is not None:
            self._start_notes.append((summary, "warning"))  # once the transcript is up

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        from dsh.ui.tui.screens.trust import TrustScreen

        answer: TrustAnswer = await dialogs.wait_screen(self, TrustScreen(question), "later")
        return answer

    async def ask_busy(self, busy: SessionBusyError) -> BusyChoice | None:
        choice = await dialogs.choose_for_busy(self, str(busy))
        if choice == "wait":
            self.status_bar.note = "waiting for the other dsh to close the session…"
            self.status_bar.show()
        return choice

    async def show_read_only(self, events: Sequence[SessionEvent]) -> None:
        """Show the session another dsh writes, as it is now, and write nothing."""
        from dsh.ui.entries import TranscriptFold

        assert self.runtime is not None
        fold = TranscriptFold(cost=self.runtime.llm.cost)
        with collector_paused():
            for event in events:
                fold.apply(event)
        from dsh.tools.service import TOOLS

        transcript = await self._mount_transcript(self.runtime.root.get(TOOLS))
        await transcript.show(fold)
        self.status_bar.fold = fold
        self.status_bar.note = "read-only: another dsh writes this session"
        self.status_bar.show()

    # ------------------------------------------------------------------ the session

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        from dsh.ui.tui.transcript_window import fold_session

        assert self.runtime is not None
        assert self.transcript is not None
        session = agent.session
        sessions = self.runtime.sessions
        with collector_paused():
            fold = fold_session(session, self.runtime.llm.cost, sessions.spent(session))
        self.fold = fold
        self._unsubscribe = [
            session.subscribe(self._on_event, from_seq=len(session.events)),
            self.runtime.sessions.follow(agent.session, failing=self._storage),
        ]
        self.prompt_area.forget_files(agent.cwd)
        self.prompt_area.prompts.load(_history_file(self, agent.cwd))
        await self.transcript.show(fold)
        if fold.status.model is None:
            fold.status.model = agent.options.model
        self.status_bar.fold = fold
        self.status_bar.note = ""
        self.status_bar.unsaved = False  # a session of its own: its writes say
        if replay:
            said = f" · {fold.status.title}" if fold.status.title else ""
            self.show(f"Resumed session {agent.id[:8]}{said}", level="info")
        else:
            self.show(
                f"dsh · {agent.options.model} · {agent.cwd} · /help lists commands and keys",
                level="info",
            )
        self._refresh_panels()
        self._set_title()

    def _on_event(self, event: Any) -> None:
        """The session's subscriber: never raises into the agent that logged it."""
        fold, transcript = self.fold, self.transcript
        if fold is None or transcript is None:
            return
        try:
            transcript.take(fold.apply(event))
        except Exception:
            self.log.error(f"event {getattr(event, 'seq', '?')} could not be shown")
            return
        self.attention.on_event(event)
        if getattr(getattr(event.data, "chunk", None), "type", None) in STREAMED:
            return  # text streaming in (hundreds of events a second) changes no panel
        if not self._refresh_scheduled:
            self._refresh_scheduled = True
            self.call_later(self._refresh_panels)

    def _refresh_panels(self) -> None:
        self._refresh_scheduled = False
        fold = self.fold
        if fold is None:
            return
        if self.status_bar.note == CANCELLING and fold.status.state == "idle":
            self.status_bar.note = ""  # the cancelled turn has ended
        # The model the next request will use (a /model switch is not in the log
        # until that request): the bar shows it while nothing runs.
        self.status_bar.next_model = self.agent.options.model if self.agent else None
        self.status_bar.show()
        self.query_one(QueuePanel).show(fold)
        self.query_one(PanelsView).show(fold)
        self._set_title()

    def _status_report(self) -> str | None:
        from dsh.ui.render import status_report

        agent = self.controller.agent
        return status_report(self.fold, agent.options if agent is not None else None)

    def _mode_changed(self, mode: PermissionMode) -> None:
        self.status_bar.mode = mode
        self.status_bar.show()

    def _set_title(self) -> None:
        """The session's title in the header and the terminal's own title (OSC 2)."""
        title = self.fold.status.title if self.fold is not None else None
        self.sub_title = title or ""
        wanted = f"dsh · {title}" if title else "dsh"
        driver = self._driver
        if wanted == self._terminal_title or driver is None or self.is_headless:
            return
        self._terminal_title = wanted
        driver.write(f"\x1b]2;{visible(wanted, one_line=True)[:120]}\x07")

    def _storage(self, error: BaseException | None) -> None:
        """The session's writes started failing (said at once, and marked on the status
        line while they fail), or work again."""
        from dsh.session.writer import RECOVERED_MESSAGE, failing_message

        self.status_bar.unsaved = error is not None
        self.status_bar.show()
        if error is None:
            self.show(RECOVERED_MESSAGE, level="info")
        else:
            self.show(failing_message(error), level="error")

    def detach(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _turn_running(self) -> bool:
        return self.controller.running()

    # ------------------------------------------------------------------ input

    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        self.run_worker(self.submit(message.text, queue=message.queue), group="submit")

    async def submit(self, text: str, *, queue: bool = False) -> None:
        """A prompt sent: a command, else a message (steering a running turn, or
        queued after it with ``queue``); what is sent before the session is open goes
        out once it is."""
        text = text.strip()
        if not text:
            return
        controller = self.controller
        if controller.read_only is None and (not self.ready.is_set() or self.agent is None):
            self._early.append((text, queue))
            self.status_bar.note = "starting… (your message goes out when ready)"
            self.status_bar.show()
            return
        sent = await controller.submit(text, queue=queue)
        self._refresh_panels()  # a command may switch the model or the mode
        if sent and self.transcript is not None:
            self.transcript.anchor()
            self.transcript.scroll_end(animate=False)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            note_key(self, event)  # a dialog tells the person's pauses from their typing
        await super().on_event(event)

    def on_typed_early(self, message: TypedEarly) -> None:
        """Keys typed for the prompt as a dialog opened: back into the prompt."""
        if message.text:
            self.prompt_area.insert(message.text)
        if message.submit:
            self.prompt_area.action_submit()

    def on_prompt_area_queue_edit(self, message: PromptArea.QueueEdit) -> None:
        """Take the newest queued message back into the prompt to edit or drop it."""
        from dsh.agent import Remove

        if self.fold is None or self.agent is None or not self.fold.queued:
            return
        item = list(self.fold.queued.values())[-1]
        if self.agent.update_inbox(item.item_id, Remove()):
            self.prompt_area.set_text(item.text)

    def action_cancel_turn(self) -> bool:
        """Esc: cancel the running turn, else stop a running ``!`` command. False
        when neither runs."""
        if self.agent is None or not self._turn_running():
            return self.controller.stop_shell()
        from dsh.session.payloads import CancelByUser

        pending = [item.text for item in self.fold.queued.values()] if self.fold else []
        self.agent.cancel(CancelByUser())  # which discards what waited in the inbox...
        if pending:  # ...so it comes back to the prompt, to send again or not
            self.prompt_area.set_text("\n\n".join([*pending, self.prompt_area.text]).strip())
        self.status_bar.note = CANCELLING
        self.status_bar.show()
        return True

    def on_text_selected(self, event: events.TextSelected) -> None:
        """The mouse button released over the transcript: copy what it selected."""
        if self.request.copy_on_select:
            self.call_after_refresh(self._copy_selection)

    def on_click(self, event: events.Click) -> None:
        # A double or triple click selects a word or a block after the release.
        if event.chain > 1 and self.request.copy_on_select:
            self.call_after_refresh(self._copy_selection)

    def _copy_selection(self) -> None:
        selected = self.screen.get_selected_text()
        if not selected:  # a plain click is a release with nothing selected
            return
        now = time.monotonic()
        last_text, last_screen, last_time = self._selection_copied
        if (selected, self.screen) == (last_text, last_screen) and now - last_time < 1.0:
            return  # the release and the click of one gesture
        self._selection_copied = (selected, self.screen, now)
        self._copy(selected, clear=False)

    def _copy(self, text: str, *, clear: bool) -> None:
        self.copy_to_clipboard(text)
        if clear:
            self.screen.clear_selection()
        lines = text.count("\n") + 1
        self.notify(f"Copied {lines} line{'s' if lines != 1 else ''}.", timeout=1.5)

    def action_interrupt(self) -> None:
        """Ctrl+C: copy the selected text (transcript or prompt), else cancel the
        running turn, else clear the prompt, else (twice within a moment) quit."""
        prompt = self.prompt_area
        selected = self.screen.get_selected_text() or prompt.selected_text
        if selected:
            self._copy(selected, clear=True)
            return
        if self._viewing():
            # Keys in a session viewer are the viewer's: no turn is cancelled, and the
            # prompt it goes back to keeps its text.
            self.notify("Esc or q goes back to the prompt.", timeout=QUIT_WINDOW_S)
            return
        now = time.monotonic()
        if self.action_cancel_turn():
            self._last_ctrl_c = 0.0  # stopping a reply is not the first press of a quit
            return
        if prompt.text:
            prompt.set_text("")
            self._last_ctrl_c = 0.0  # nor is clearing what was typed
            return
        if now - self._last_ctrl_c < QUIT_WINDOW_S:
            self.run_worker(self.quit(), group="quit")
            return
        self._last_ctrl_c = now
        self.notify("Press Ctrl+C again to quit.", timeout=QUIT_WINDOW_S)

    def _viewing(self) -> bool:
        from dsh.ui.tui.screens.viewer import SessionViewer

        return isinstance(self.screen, SessionViewer)

    def action_scroll_transcript(self, direction: int) -> None:
        self.scroll_transcript("page_up" if direction < 0 else "page_down")

    def action_toggle_details(self) -> None:
        """Ctrl+O: every tool card's output and every thought on screen opened in full,
        or (when all are open already) closed again."""
        if self.transcript is not None:
            self.transcript.toggle_details()

    def on_prompt_area_cycle_mode(self, message: PromptArea.CycleMode) -> None:
        """Shift+Tab: default → accept-edits → plan → default. ``bypass`` is never a
        key press away; a session started in it, or in read-only (which ``/permissions``
        chooses: plan mode is what a person cycling wants, explore then propose, and
        read-only, which still asks about commands, is the rarer choice), leaves it for
        default."""
        if self.runtime is None:
            return
        from dsh.tools.approval import APPROVALS

        approvals = self.runtime.root.get(APPROVALS)
        order: tuple[PermissionMode, ...] = ("default", "accept-edits", "plan")
        current = approvals.mode
        approvals.mode = (  # the status bar hears of it (_mode_changed)
            order[(order.index(current) + 1) % len(order)] if current in order else "default"
        )

    def on_prompt_area_escape(self, message: PromptArea.Escape) -> None:
        """Esc: leave the cards, else cancel the running turn, else (twice within a
        moment, nothing typed) open the rewind picker, as ``/rewind`` does."""
        transcript = self.transcript
        if transcript is not None and transcript.on_card():
            transcript.clear_cursor()
            self._card_hint(False)
            return
        if self.action_cancel_turn():
            self._last_escape = 0.0
            return
        now = time.monotonic()
        if not self.prompt_area.text and now - self._last_escape < ESCAPE_WINDOW_S:
            self._last_escape = 0.0
            if not self.ready.is_set() or self.agent is None or self.fold is None:
                return
            from dsh.ui.entries import UserEntry

            if not any(isinstance(entry, UserEntry) for entry in self.fold.entries):
                self.notify("No turn to rewind to yet.", timeout=2)
                return
            self.run_worker(self.submit("/rewind"), group="rewind")
            return
        self._last_escape = now

    def on_prompt_area_prompt_list(self, message: PromptArea.PromptList) -> None:
        """Ctrl+R: this session's prompts, to take one back into an empty prompt."""
        if self.prompt_area.text:
            self.notify("Ctrl+R puts an earlier prompt into an empty prompt.", timeout=2)
            return
        self.run_worker(self.pick_prompt(), group="prompts")

    async def pick_prompt(self) -> None:
        """The session's prompts, newest first; the one picked goes back into the
        prompt, to edit and send again."""
        from dsh.ui.entries import UserEntry

        if self.fold is None:
            return
        prompts = [e.text for e in reversed(self.fold.entries) if isinstance(e, UserEntry)]
        if not prompts:
            self.notify("No prompts in this session yet.", timeout=2)
            return
        items = [visible(" ".join(text.split()), one_line=True)[:200] for text in prompts]
        picked = await dialogs.choose(
            self,
            "Earlier prompts of this session",
            items,
            hint="↑↓ choose · Enter: back into the prompt, to edit and send · Esc: close",
        )
        if picked is not None:
            self.prompt_area.set_text(prompts[picked])
            self.prompt_area.focus()

    def on_prompt_area_card_cursor(self, message: PromptArea.CardCursor) -> None:
        """Ctrl+Up/Ctrl+Down: the card cursor over tool cards and thoughts."""
        if self.transcript is not None:
            self._card_hint(self.transcript.move_cursor(message.step))

    def on_prompt_area_open_card(self, message: PromptArea.OpenCard) -> None:
        """Enter on a card: a subagent's run opens as its own transcript; any other
        card opens in full, or closes."""
        if self.transcript is None:
            return
        opened = self.transcript.cursor_session()
        if opened is not None:
            self.run_worker(self.view_session(*opened), group="viewer")
            return
        self.transcript.open_cursor()

    async def view_session(self, session_id: str, title: str | None = None) -> None:
        """Show ``session_id``'s transcript, read-only, over the main screen (followed
        while its agent runs in this process); Esc or q comes back."""
        from dsh.agent.service import AGENTS
        from dsh.tools.service import TOOLS
        from dsh.ui.tui.screens.viewer import SessionViewer

        runtime = self.runtime
        if runtime is None:
            return
        viewer = SessionViewer(
            session_id,
            sessions=runtime.sessions,
            agents=runtime.root.get(AGENTS).list(),
            tools=runtime.root.get(TOOLS),
            cost=runtime.llm.cost,
            title=title,
        )
        await self.push_screen(viewer)

    def _card_hint(self, on: bool) -> None:
        note = CARD_HINT if on else ""
        if on or self.status_bar.note == CARD_HINT:
            self.status_bar.note = note
            self.status_bar.show()

    def on_prompt_area_scroll(self, message: PromptArea.Scroll) -> None:
        self.scroll_transcript(message.where)

    def scroll_transcript(self, where: str) -> None:
        """``page_up``, ``page_down``, ``top`` (paging in older entries) or ``bottom``
        (where it follows new output again)."""
        if self.transcript is not None:
            self.transcript.scroll_to_key(where)

    async def on_unmount(self) -> None:
        await self.shutdown()  # however the app ended: close the session and the runtime

    async def action_quit(self) -> None:
        await self.quit()

    # ------------------------------------------------------------------ dialogs

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        with self.attention.approval(request):
            return await dialogs.ask_approval(self, request, stop=self.action_cancel_turn)

    async def ask_questions(self, questions: Sequence[Question]) -> list[Answer] | None:
        self.status_bar.asking = True  # the log says a tool runs; it waits for the person
        self.status_bar.show()
        try:
            with self.attention.question(questions):
                return await dialogs.ask_questions(self, questions)
        finally:
            self.status_bar.asking = False
            self.status_bar.show()

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        self.status_bar.asking = True  # the log says a tool runs; it waits for the person
        self.status_bar.show()
        try:
            with self.attention.plan(review):
                return await dialogs.ask_plan(self, review)
        finally:
            self.status_bar.asking = False
            self.status_bar.show()

    async def pick_session(self) -> str | None:
        assert self.runtime is not None
        sessions = self.runtime.sessions
        return await dialogs.pick_session(
            self, sessions.catalog, sessions.index_missing, str(self.cwd), self.show
        )

    # ------------------------------------------------------------------ lines

    async def _pasted(self, text: str | None) -> PasteResult | None:
        """What the plugins make of a paste into the prompt (None: nobody took it)."""
        from dsh.agent.hooks import PROMPT_PASTE

        agent, runtime = self.agent, self.runtime
        if agent is None or runtime is None:
            return None
        return await runtime.root.serial(PROMPT_PASTE, agent, text)

    def on_prompt_area_notice(self, message: PromptArea.Notice) -> None:
        self.show(message.text, level=message.level)

    def show(self, text: str, *, level: str = "info") -> None:
        """A line from the UI itself (a command's output, a hint) under the transcript."""
        from dsh.ui.entries import NoticeEntry
        from dsh.ui.tui.transcript_view import NoticeView

        severity: Literal["info", "warning", "error"] = (
            "error" if level == "error" else "warning" if level == "warning" else "info"
        )
        if self.transcript is None:
            self.notify(text, severity="error" if severity == "error" else "information")
            return
        entry = NoticeEntry(f"ui:{time.monotonic_ns()}", 0, severity, visible(text))
        self.transcript.add_local(NoticeView(entry))

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        return await dialogs.choose(self, title, items, current=current)

    async def quit(self) -> None:
        await self.shutdown()
        self.exit(self.exit_code, return_code=self.exit_code)

    async def shutdown(self) -> None:
        """Cancel what runs, store and close the session, unload the runtime (once)."""
        await self.controller.close(self.end_reason)


class TuiRewinder:
    """``/rewind`` (and Esc Esc) in the TUI: its picker screen, and the rewound prompt
    back in the prompt box."""

    def __init__(self, app: DshApp) -> None:
        self.app = app

    async def ask(
        self,
        turns: Sequence[TurnRow],
        preview: Preview,
        *,
        turn: TurnRow | None = None,
        choice: RewindChoice | None = None,
    ) -> RewindPick | None:
        return await dialogs.ask_rewind(self.app, turns, preview, turn=turn, choice=choice)

    def put_back(self, prompt: str) -> None:
        area = self.app.prompt_area
        # What was typed meanwhile stays, after it.
        area.set_text("\n\n".join(text for text in (prompt, area.text) if text.strip()))
        area.focus()

    def said(self, text: str) -> None:
        self.app.run_worker(self._say(text), group="rewind-said")

    async def _say(self, text: str) -> None:
        # A rewind draws the transcript again from the fold (its notices of the UI's
        # own with it): said once that is done, it stays on screen.
        redrawing = [w for w in self.app.workers if w.group == "rewound" and not w.is_finished]
        if redrawing:
            await self.app.workers.wait_for_complete(redrawing)
        self.app.show(text)


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(name)


def _history_file(app: DshApp, cwd: Path) -> Path:
    from dsh.paths import dsh_home
    from dsh.ui.prompt_history import history_path

    return history_path(app.request.home or dsh_home(), cwd)


async def run_tui(
    request: TuiRequest,
    *,
    mouse: bool = True,
    resume_hint: bool = True,
    early: EarlyTerminal | None = None,
) -> int:
    import signal
    import sys

    app = DshApp(request)
    if sys.platform != "win32":
        from textual.drivers.linux_driver import LinuxDriver

        from dsh.ui.tui.input_driver import driver_class

        if app.driver_class is LinuxDriver:
            app.driver_class = driver_class(early)

    def terminate() -> None:
        # Ended as by the person (the session closed, its SessionEnd hooks run), not
        # killed mid-write; a second SIGTERM kills at once.
        loop.remove_signal_handler(signal.SIGTERM)
        app.end_reason = "other"
        app.exit_code = EXIT_TERMINATED
        app.exit(EXIT_TERMINATED, return_code=EXIT_TERMINATED)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        code = await app.run_async(mouse=mouse)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await app.shutdown()
    # The terminal is the shell's again.
    for line in app.controller.unsaved:  # what could not be stored, said where it stays
        sys.stderr.write(f"dsh: {line}\n")
    if resume_hint and app.resumable is not None:
        sys.stdout.write(f"Resume this session with: dsh --resume {app.resumable}\n")
    code = code if isinstance(code, int) else app.exit_code
    return EXIT_FAILED if app.controller.unsaved and code == EXIT_OK else code
