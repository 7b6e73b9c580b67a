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
the keys (what its own keys do is :mod:`dsh.ui.tui.key_actions`'), and shows the
dialogs (approval, questions, trust, setup, busy session: :mod:`dsh.ui.tui.dialogs`).
It is run by :func:`dsh.ui.tui.launch.run_tui`.
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
from dsh.ui.tui.key_actions import KeyActions
from dsh.ui.tui.prompt_input import CompletionMenu, PromptArea
from dsh.ui.tui.rewinder import TuiRewinder
from dsh.ui.tui.screens.guard import TypedEarly, note_key
from dsh.ui.tui.selecting import SelectionCopier
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
    from dsh.ui.trusting import TrustAnswer, TrustQuestion
    from dsh.ui.tui.transcript_view import Transcript

EXIT_OK, EXIT_FAILED = 0, 1
EXIT_TERMINATED = 143  # 128 + SIGTERM
CANCELLING = "cancelling…"
STREAMED = frozenset({"text-delta", "reasoning-delta"})
"""The ``assistant/chunk`` events that only add text to an answer or a thought."""
CARD_HINT = "card: Enter opens · Esc leaves"
PREVIEW_MODULES = ("dsh.ui.tui.preview", "dsh.ui.tui.transcript_view")
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
        self.controller.rewind_asker = TuiRewinder(self, self.show)
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
        self.keys = KeyActions(self)
        self.copier = SelectionCopier(self)
        self._terminal_title = ""
        self.ready = asyncio.Event()
        self.attention = Attention(self, self.request.notify)
        from dsh.paths import dsh_home
        from dsh.ui.tui.theming import preset_theme, register_themes

        # Before the stylesheet is first parsed: it uses the themes' variables.
        self._theme_errors = register_themes(self, self.request.home or dsh_home())
        preset_theme(self, self.request.theme)

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
        """Show a stored session, read-only, while the runtime and its plugins load
        (see :mod:`dsh.ui.tui.preview`)."""
        from dsh.ui.tui.preview import stored_fold

        settings = await self.controller.settings()
        fold = await stored_fold(self.controller.home, settings.storage.backend, session_id)
        if fold is None:
            return
        await self._put_on_screen(fold, None, "loading…")
        self._say_resumed(session_id, fold)

    async def _put_on_screen(self, fold: TranscriptFold, tools: Any, note: str) -> None:
        """``fold`` in the transcript and on the status bar, with ``note`` there."""
        transcript = await self._mount_transcript(tools)
        await transcript.show(fold)
        self.status_bar.fold = fold
        self.status_bar.note = note
        self.status_bar.show()

    def _say_resumed(self, session_id: str, fold: TranscriptFold) -> None:
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
        from dsh.ui.tui.commands import KEYS_HELP, register_tui_commands

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
        # The plugins' own forms, unless the program configured them (the demo).
        forms = self.request.plugin_configs is None
        return await dialogs.set_up(self, home, self.cwd, settings, plugin_forms=forms)

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
        from dsh.tools.service import TOOLS
        from dsh.ui.tui.preview import fold_of

        assert self.runtime is not None
        fold = fold_of(events, self.runtime.llm.cost)
        tools = self.runtime.root.get(TOOLS)
        await self._put_on_screen(fold, tools, "read-only: another dsh writes this session")

    # ------------------------------------------------------------------ the session

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        from dsh.paths import dsh_home
        from dsh.ui.prompt_history import history_path
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
        self.prompt_area.prompts.load(history_path(self.request.home or dsh_home(), agent.cwd))
        if fold.status.model is None:
            fold.status.model = agent.options.model
        self.status_bar.unsaved = False  # a session of its own: its writes say
        await self._put_on_screen(fold, self.transcript.tools, "")
        if replay:
            self._say_resumed(agent.id, fold)
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
        self.keys.edit_queued()

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
            self.copier.after_release()

    def on_click(self, event: events.Click) -> None:
        # A double or triple click selects a word or a block after the release.
        if event.chain > 1 and self.request.copy_on_select:
            self.copier.after_release()

    def action_interrupt(self) -> None:
        self.keys.interrupt()

    def action_scroll_transcript(self, direction: int) -> None:
        self.scroll_transcript("page_up" if direction < 0 else "page_down")

    def action_toggle_details(self) -> None:
        """Ctrl+O: every tool card's output and every thought on screen opened in full,
        or (when all are open already) closed again."""
        if self.transcript is not None:
            self.transcript.toggle_details()

    def on_prompt_area_cycle_mode(self, message: PromptArea.CycleMode) -> None:
        self.keys.cycle_mode()

    def on_prompt_area_escape(self, message: PromptArea.Escape) -> None:
        self.keys.escape()

    def on_prompt_area_prompt_list(self, message: PromptArea.PromptList) -> None:
        self.keys.list_prompts()

    def on_prompt_area_card_cursor(self, message: PromptArea.CardCursor) -> None:
        """Ctrl+Up/Ctrl+Down: the card cursor over tool cards and thoughts."""
        if self.transcript is not None:
            self.card_hint(self.transcript.move_cursor(message.step))

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
        from dsh.ui.tui.screens.viewer import SessionViewer

        if self.runtime is not None:
            await self.push_screen(SessionViewer.in_runtime(self.runtime, session_id, title))

    def card_hint(self, on: bool) -> None:
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
        with self.status_bar.waiting_for_person(), self.attention.question(questions):
            return await dialogs.ask_questions(self, questions)

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        with self.status_bar.waiting_for_person(), self.attention.plan(review):
            return await dialogs.ask_plan(self, review)

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


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(name)
