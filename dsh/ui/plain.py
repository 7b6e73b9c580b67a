"""Plain line mode, ``dsh --plain``: the interactive agent as lines of text.

For dumb terminals, screen readers and logs: a prompt-toolkit prompt below plain
``rich`` output, with no live regions, spinners or cursor tricks. It renders from
the same session events as the Textual app (see :mod:`dsh.ui.plain_printer`).

Keys: Enter sends a message (while a turn runs it steers the turn); Ctrl+C cancels
the running turn, or clears the line when idle; Ctrl+D (end of input) quits once
the running turn ended. Approvals, questions and plans become text prompts (see
:mod:`dsh.ui.plain_dialogs`); a change of permission mode is said in one line.
Commands: ``/new``, ``/resume [id]``, ``/status``, ``/help``, ``/quit``, and whatever
plugins register. Start-up, sessions and commands are the
:mod:`~dsh.ui.session_controller`'s; this module prints and reads.

Colours follow the terminal: none with ``NO_COLOR``, ``TERM=dumb`` or when
stdout is not a terminal. When stdin is not a terminal, lines are read from it as
a script: each is echoed after its prompt, the next prompt waits for the turn to
end (approvals and questions take their answers from the script), and the end of
input quits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from prompt_toolkit.input import Input
from prompt_toolkit.output import DummyOutput, Output, create_output
from rich.console import Console
from rich.text import Text

from dsh.agent.hooks import AGENT_STATUS
from dsh.control_chars import visible
from dsh.paths import dsh_home
from dsh.session import SessionBusyError, SessionEvent
from dsh.session.payloads import CancelByUser
from dsh.session.store import SESSIONS
from dsh.session.writer import RECOVERED_MESSAGE, failing_message
from dsh.settings import Settings
from dsh.tools.approval import PERMISSION_MODE_CHANGED, ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.tools.service import TOOLS
from dsh.ui.entries import TranscriptFold
from dsh.ui.opening import BUSY_CHOICES, BusyChoice
from dsh.ui.plain_dialogs import Dialogs, trust_asker
from dsh.ui.plain_input import (
    Interrupted,
    LineReader,
    Lines,
    PlainCompleter,
    PromptReader,
    StreamReader,
    above_prompt,
    file_history,
    stdin_is_terminal,
)
from dsh.ui.plain_printer import TranscriptPrinter
from dsh.ui.render import VisibleOutput, status_report
from dsh.ui.session_controller import SessionController, StartFailed
from dsh.ui.trusting import TrustAnswer, TrustQuestion, ignored_lines
from dsh.ui.user_interface import SessionChoice

if TYPE_CHECKING:
    from dsh.agent import AgentHandle
    from dsh.frontend import Kind
    from dsh.permission_modes import PermissionMode
    from dsh.runtime import Runtime

EXIT_OK, EXIT_FAILED = 0, 1
LEVEL_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}
PLAIN_KEYS = (
    "Keys: Enter sends (while a turn runs, it steers the turn) · Ctrl+C cancels the turn"
    " or clears the line · Ctrl+D quits · Tab completes /commands and @paths ·"
    " !command runs a shell command"
)


@dataclass(frozen=True, kw_only=True)
class PlainRequest(SessionChoice):
    """``dsh --plain``: the session choices, nothing of its own."""


@dataclass(frozen=True)
class InputLine:
    """The one input line: its reader, the turns the prompt and the dialogs take on
    it, and the dialogs."""

    reader: LineReader
    lines: Lines
    dialogs: Dialogs


def plain_console(output: TextIO | None = None, *, force_terminal: bool | None = None) -> Console:
    """Line-oriented rich output. ``NO_COLOR`` (set and not empty) means no escape
    codes at all, not even bold; rich drops colour by itself for ``TERM=dumb`` and
    for output that is not a terminal."""
    no_color = bool(os.environ.get("NO_COLOR"))
    console = Console(
        file=output,
        force_terminal=force_terminal,
        color_system=None if no_color else "auto",
        markup=False,
        highlight=False,
        emoji=False,
    )
    console.push_render_hook(VisibleOutput())
    return console


async def run_plain(
    request: PlainRequest,
    *,
    input: Input | None = None,
    output: TextIO | None = None,
    runtime: Runtime | None = None,
) -> int:
    """Run plain mode until the person quits. ``input`` (a prompt-toolkit input, such
    as ``create_pipe_input()``) and ``output`` (where the transcript is written)
    replace the terminal, and ``runtime`` an own runtime (which is then left open),
    for tests and embedding. Returns the exit status."""
    app = PlainApp(request, plain_console(output), input=input, output=output, runtime=runtime)
    return await app.run()


class PlainApp:
    """One plain-mode run: the session on screen printed as lines, the input loop, and
    the dialogs as text prompts: the :class:`~dsh.ui.user_interface.UserInterface`
    of its :class:`~dsh.ui.session_controller.SessionController`."""

    kind: Kind = "plain"
    answers = True
    one_session = False

    def __init__(
        self,
        request: PlainRequest,
        console: Console,
        *,
        input: Input | None = None,
        output: TextIO | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.request = request
        self.console = console
        self.input, self.output = input, output
        self.controller = SessionController(self, request, runtime=runtime)
        self.cwd = self.controller.cwd
        self.attended = input is not None or stdin_is_terminal()
        """Somebody types the input (a script on stdin: nobody to ask)."""
        self.fold = TranscriptFold()
        """The transcript of the session on screen."""
        self.quitting = False
        self._unsubscribe: Callable[[], None] | None = None
        # The input line opens once the runtime is up: the trust question comes first,
        # on a prompt of its own.
        self._line: InputLine | None = None

    @property
    def line(self) -> InputLine:
        assert self._line is not None, "the input line opens once the runtime is up"
        return self._line

    # ------------------------------------------------------------------ running

    async def run(self) -> int:
        controller = self.controller
        try:
            try:
                await controller.start()
                self._open_input()
                controller.ctx.on(AGENT_STATUS, self._redraw_prompt)
                controller.ctx.on(PERMISSION_MODE_CHANGED, self._mode_changed)
                controller.add_session_commands(PLAIN_KEYS, self._status_report)
                await controller.open_first()
            except StartFailed as failed:
                self.show(str(failed), level="error")
                return EXIT_FAILED
            await controller.sandbox_status()  # its warning, before the first prompt
            with self._terminal(), self._sigint():
                if self.request.prompt:
                    await controller.submit(self.request.prompt)
                await self._loop()
        finally:
            if self._line is not None:
                self._line.reader.close()
            await controller.close("exit")
        # Said last, after the transcript: what is not stored is the outcome of the run.
        for line in controller.unsaved:
            self.show(f"dsh: {line}", level="error")
        return EXIT_FAILED if controller.unsaved else EXIT_OK

    def _open_input(self) -> None:
        reader = self._reader(self.input, self.output)
        lines = Lines(reader)
        self._line = InputLine(reader, lines, Dialogs(lines, self.console, self.interrupt))

    def _reader(self, input: Input | None, output: TextIO | None) -> LineReader:
        if not self.attended:
            return StreamReader(sys.stdin, self.console)
        pt_output: Output | None = None
        if output is not None:
            pt_output = DummyOutput()
        elif not sys.stdout.isatty():
            pt_output = create_output(always_prefer_tty=True)  # the prompt on stderr
        completer = PlainCompleter(
            self.controller.commands.complete, self._agent_cwd, self.controller.mentions
        )
        history = file_history(dsh_home(), self.cwd)
        return PromptReader(input=input, output=pt_output, history=history, completer=completer)

    @contextlib.contextmanager
    def _terminal(self) -> Iterator[None]:
        """On a terminal, output goes above the open prompt instead of through it."""
        prompting = isinstance(self.line.reader, PromptReader)
        if self.output is None and prompting and sys.stdout.isatty():
            with above_prompt():
                yield
        else:
            yield

    @contextlib.contextmanager
    def _sigint(self) -> Iterator[None]:
        """Ctrl+C outside a prompt (the terminal is not in raw mode then) cancels the
        running turn instead of stopping dsh."""
        if self.input is not None or threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.interrupt)
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    async def _loop(self) -> None:
        scripted = isinstance(self.line.reader, StreamReader)
        while not self.quitting:
            agent = self.controller.agent
            if scripted and agent is not None:
                # A script's next line is the next prompt: wait for this turn (its
                # approvals and questions still read their answers from the script).
                await agent.when_idle()
            try:
                line = await self.line.lines.next_line(self._message)
            except Interrupted:
                self.interrupt()
                continue
            except EOFError:
                agent = self.controller.agent
                if agent is not None and self.controller.running():
                    self.show("Waiting for the turn to end (Ctrl+C cancels it)…")
                    await agent.when_idle()
                return
            await self.controller.submit(line)

    def _message(self) -> str:
        return "» " if self.controller.running() else "> "

    def _redraw_prompt(self, *_: object) -> None:
        """The prompt's mark says whether a turn runs: draw it again when that changes.
        The turn's last line goes out before the agent is idle, and nothing else may
        draw the prompt after it."""
        reader = self.line.reader
        if isinstance(reader, PromptReader) and reader.main.app.is_running:
            reader.main.app.invalidate()

    def _status_report(self) -> str | None:
        agent = self.controller.agent
        return status_report(self.fold, agent.options if agent is not None else None)

    def _mode_changed(self, mode: PermissionMode) -> None:
        """An approved plan, ``/plan`` or ``/permissions`` changed what runs unasked:
        said where the person reads, as it happens."""
        self.show(f"Permission mode is now {mode}", level="bold")

    def _agent_cwd(self) -> Path:
        agent = self.controller.agent
        return agent.cwd if agent is not None else self.cwd

    def interrupt(self) -> None:
        """Ctrl+C: cancel the running turn (idle: nothing to do, the line is cleared)."""
        agent = self.controller.agent
        if agent is not None and self.controller.running():
            self.show("Cancelling the turn…", level="warning")
            agent.cancel(CancelByUser())

    # ------------------------------------------------------------------ the session on screen

    def _printer(self) -> TranscriptPrinter:
        """A new transcript, printed as lines."""
        runtime = self.controller.runtime
        assert runtime is not None
        self.fold = TranscriptFold(cost=runtime.llm.cost)
        return TranscriptPrinter(self.console, self.controller.ctx.get(TOOLS), self.fold)

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        printer = self._printer()
        events = list(agent.session.events)
        if replay:
            printer.replay(events)
        else:
            for event in events:
                self.fold.apply(event)
        stop_printing = agent.session.subscribe(printer, from_seq=len(events))
        stop_following = agent.ctx.get(SESSIONS).follow(agent.session, failing=self._storage)

        def unsubscribe() -> None:
            stop_printing()
            stop_following()

        self._unsubscribe = unsubscribe
        model = agent.options.model
        if replay:
            title = self.fold.status.title
            said = f" · {title}" if title else ""
            self.show(f"── resumed session {agent.id[:8]}{said} · {model}", level="dim")
        else:
            self.show(
                f"dsh · {model} · session {agent.id[:8]} in {agent.cwd} · "
                "/help for commands, Ctrl+D to quit",
                level="dim",
            )

    def _storage(self, error: BaseException | None) -> None:
        """Said the moment the session's writes start failing, and when they work again."""
        if error is None:
            self.show(RECOVERED_MESSAGE, level="green")
        else:
            self.show(failing_message(error), level="error")

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def show_read_only(self, events: Sequence[SessionEvent]) -> None:
        self._printer().replay(list(events))

    def show(self, text: str, *, level: str = "info") -> None:
        self.console.print(Text(text, style=LEVEL_STYLES.get(level, level)), soft_wrap=True)

    def show_ignored(self, settings: Settings) -> None:
        for line in ignored_lines(settings):
            self.console.print(Text(line, style="yellow"), soft_wrap=True)

    def show_warning(self, text: str) -> None:
        # On stderr, as dsh's other start-up lines: it stays out of a transcript
        # redirected to a file, and is seen where the prompt is.
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"dsh: {visible(text)}\n")
            sys.stderr.flush()

    async def quit(self) -> None:
        self.quitting = True

    # ------------------------------------------------------------------ dialogs

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        # A script on stdin has nobody behind it to ask: as headless, untrusted
        # configuration that widens anything is ignored.
        if not self.attended:
            return "later"
        return await trust_asker(self.console, self.input, self.output)(question)

    async def set_up(self, home: Path, settings: Settings) -> bool | None:
        return None  # no setup form here: the first request says what is missing

    async def ask_busy(self, busy: SessionBusyError) -> BusyChoice | None:
        if not self.attended:
            return None  # a script on stdin: nobody to choose
        self.show(str(busy), level="warning")
        picked = await self.line.dialogs.choose("What now?", [label for _, label in BUSY_CHOICES])
        if picked is None:
            return None
        choice = BUSY_CHOICES[picked][0]
        if choice == "wait":
            self.show("Waiting for the other dsh to close it (Ctrl+C gives up)…")
        return choice

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        return await self.line.dialogs.approve(request)

    async def ask_questions(self, questions: Sequence[Question]) -> list[Answer] | None:
        return await self.line.dialogs.answer(questions)

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        return await self.line.dialogs.review_plan(review)

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        if not self.attended:
            return None  # a script's next line is its next prompt, not an answer
        marked = [f"{item} (current)" if i == current else item for i, item in enumerate(items)]
        return await self.line.dialogs.choose(title, marked)

    async def pick_session(self) -> str | None:
        # A numbered list, answered as a dialog is: in a script, by its next line.
        return await self.controller.choose_recent_session(self.line.dialogs.choose)
