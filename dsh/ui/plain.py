"""Plain line mode, ``dsh --plain``: the interactive agent as lines of text.

For dumb terminals, screen readers and logs: a prompt-toolkit prompt below plain
``rich`` output, with no live regions, spinners or cursor tricks. It renders from
the same session events as the Textual app (see :mod:`dsh.ui.plain_printer`).

Keys: Enter sends a message (while a turn runs it steers the turn); Ctrl+C cancels
the running turn, or clears the line when idle; Ctrl+D (end of input) quits once
the running turn ended. Approvals and questions become text prompts (see
:mod:`dsh.ui.plain_dialogs`). Commands: ``/new``, ``/resume [id]``, ``/status``,
``/help``, ``/quit``, and whatever plugins register.

Colours follow the terminal: none with ``NO_COLOR``, ``TERM=dumb`` or when
stdout is not a terminal. When stdin is not a terminal, lines are read from it as
a script: each is echoed after its prompt, the next prompt waits for the turn to
end (approvals and questions take their answers from the script), and the end of
input quits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
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

from dsh.commands import CommandContext, parse_command
from dsh.llm import SessionId, user_text
from dsh.paths import dsh_home
from dsh.session import PersistenceError, SessionBusyError
from dsh.session.events import CancelByUser
from dsh.tools.permissions import PermissionMode
from dsh.ui.entries import TranscriptFold
from dsh.ui.opening import (
    BUSY_CHOICES,
    NothingToContinue,
    after_busy,
    close_agent,
    open_agent,
    start_new_session,
    switch_session,
)
from dsh.ui.plain_commands import pick_session, register_commands
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
from dsh.ui.render import VisibleOutput

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.runtime import Runtime

EXIT_OK, EXIT_FAILED = 0, 1
LEVEL_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}


@dataclass
class PlainRequest:
    prompt: str | None = None
    cwd: Path | None = None
    resume: str | None = None
    continue_last: bool = False
    model: str | None = None
    provider: str | None = None
    effort: str | None = None
    permission_mode: PermissionMode | None = None
    trust: bool = False
    fork: bool = False
    wait: bool = False


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
    cwd = (request.cwd or Path.cwd()).resolve()
    console = plain_console(output)
    owned = runtime is None
    if runtime is None:
        from dsh.runtime import start_runtime
        from dsh.settings import SettingsError
        from dsh.ui.trusting import ignored_lines, settle

        # A script on stdin has nobody behind it to ask: as headless, untrusted
        # configuration that widens anything is ignored.
        interactive = input is not None or stdin_is_terminal()
        ask = trust_asker(console, input, output) if interactive else None
        try:
            settings = await settle(dsh_home(), cwd, trust=request.trust, ask=ask)
            for line in ignored_lines(settings):
                console.print(Text(line, style="yellow"), soft_wrap=True)
            runtime = await start_runtime(
                cwd=cwd, permission_mode=request.permission_mode, settings=settings
            )
        except SettingsError as error:
            sys.stderr.write(f"dsh: {error}\n")
            return EXIT_FAILED
    try:
        app = PlainApp(runtime, request, cwd, console, input=input, output=output)
        return await app.run()
    finally:
        if owned:
            await runtime.aclose()


class PlainApp:
    """One plain-mode run: the agent on screen, its printer, the input loop; and the
    :class:`~dsh.commands.CommandHost` its commands talk to."""

    def __init__(
        self,
        runtime: Runtime,
        request: PlainRequest,
        cwd: Path,
        console: Console,
        *,
        input: Input | None = None,
        output: TextIO | None = None,
    ) -> None:
        self.runtime = runtime
        self.request = request
        self.cwd = cwd
        self.console = console
        self.input, self.output = input, output
        self.ui = runtime.root.child(name="plain")
        self.commands = self.ui.get("commands")
        self.tools = runtime.root.get("tools")
        self.agent: Agent | None = None
        self.fold = TranscriptFold(cost=runtime.llm.cost)
        self.quitting = False
        self._unsubscribe: Callable[[], None] | None = None
        self.reader = self._reader(input, output)
        self.lines = Lines(self.reader)
        self.dialogs = Dialogs(self.lines, console, self.interrupt)

    # ------------------------------------------------------------------ running

    async def run(self) -> int:
        self.ui.get("approvals").add_approver(self.dialogs.approve)
        self.ui.get("questions").set_answerer(self.dialogs.answer)
        self.ui.on("agent/status", self._redraw_prompt)
        register_commands(self)
        try:
            code = await self._open_first()
            if code != EXIT_OK:
                return code
            with self._terminal(), self._sigint():
                if self.request.prompt:
                    await self.submit(self.request.prompt)
                await self._loop()
            return EXIT_OK
        finally:
            self.reader.close()
            await self.detach()
            await self.ui.dispose()

    def _reader(self, input: Input | None, output: TextIO | None) -> LineReader:
        if input is None and not stdin_is_terminal():
            return StreamReader(sys.stdin, self.console)
        pt_output: Output | None = None
        if output is not None:
            pt_output = DummyOutput()
        elif not sys.stdout.isatty():
            pt_output = create_output(always_prefer_tty=True)  # the prompt on stderr
        completer = PlainCompleter(self.commands.complete, self._agent_cwd)
        history = file_history(dsh_home(), self.cwd)
        return PromptReader(input=input, output=pt_output, history=history, completer=completer)

    @contextlib.contextmanager
    def _terminal(self) -> Iterator[None]:
        """On a terminal, output goes above the open prompt instead of through it."""
        prompting = isinstance(self.reader, PromptReader)
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
        scripted = isinstance(self.reader, StreamReader)
        while not self.quitting:
            if scripted and self.agent is not None:
                # A script's next line is the next prompt: wait for this turn (its
                # approvals and questions still read their answers from the script).
                await self.agent.when_idle()
            try:
                line = await self.lines.next_line(self._message)
            except Interrupted:
                self.interrupt()
                continue
            except EOFError:
                if self._running():
                    self.show("Waiting for the turn to end (Ctrl+C cancels it)…")
                    assert self.agent is not None
                    await self.agent.when_idle()
                return
            await self.submit(line)

    def _message(self) -> str:
        return "» " if self._running() else "> "

    def _redraw_prompt(self, *_: object) -> None:
        """The prompt's mark says whether a turn runs: draw it again when that changes.
        The turn's last line goes out before the agent is idle, and nothing else may
        draw the prompt after it."""
        if isinstance(self.reader, PromptReader) and self.reader.main.app.is_running:
            self.reader.main.app.invalidate()

    def _running(self) -> bool:
        return self.agent is not None and self.agent.status != "idle"

    def _agent_cwd(self) -> Path:
        return self.agent.cwd if self.agent is not None else self.cwd

    def interrupt(self) -> None:
        """Ctrl+C: cancel the running turn (idle: nothing to do, the line is cleared)."""
        if self.agent is not None and self._running():
            self.show("Cancelling the turn…", level="warning")
            self.agent.cancel(CancelByUser())

    async def submit(self, line: str) -> None:
        """A typed line: a command, else a message (steering a running turn)."""
        text = line.strip()
        if not text or self.agent is None:
            return
        parsed = parse_command(text)
        if parsed is not None:
            context = CommandContext(agent=self.agent, root=self.runtime.root, host=self)
            if not await self.commands.run(text, context):
                self.show(f"Unknown command /{parsed[0]} (/help lists them).", level="error")
            return
        message = user_text(text)
        if self._running():
            self.agent.steer(message)
        else:
            self.agent.followup(message)

    # ------------------------------------------------------------------ sessions

    async def _open_first(self) -> int:
        request = self.request
        opened = functools.partial(
            open_agent,
            self.runtime,
            self.cwd,
            model=request.model,
            provider=request.provider,
            effort=request.effort,
        )
        try:
            agent, resumed = await opened(
                resume=request.resume,
                continue_last=request.continue_last,
                fork=request.fork,
                wait=request.wait,
            )
        except NothingToContinue as error:
            self.show(str(error), level="error")
            return EXIT_FAILED
        except SessionBusyError as busy:
            self.show(f"dsh: {busy}", level="error")
            if not isinstance(self.reader, PromptReader):
                return EXIT_FAILED  # a script on stdin: nobody to choose
            labels = [label for _, label in BUSY_CHOICES]
            picked = await self.dialogs.choose("What now?", labels)
            if picked is None:
                return EXIT_FAILED
            choice = BUSY_CHOICES[picked][0]
            if choice == "read":
                stored = SessionId(busy.session_id)
                loaded = await self.runtime.sessions.persistence.inspect(stored)
                TranscriptPrinter(self.console, self.tools, self.fold).replay(loaded.events)
                return EXIT_OK
            if choice == "wait":
                self.show("Waiting for the other dsh to close it (Ctrl+C gives up)…")
            try:
                agent, resumed = await opened(**after_busy(choice, busy.session_id))
            except (LookupError, ValueError, OSError, PersistenceError) as error:
                self.show(f"dsh: {error}", level="error")
                return EXIT_FAILED
        except (LookupError, ValueError, OSError, PersistenceError) as error:
            self.show(f"dsh: {error}", level="error")
            return EXIT_FAILED
        await self.attach(agent, replay=resumed)
        return EXIT_OK

    async def attach(self, agent: Agent, *, replay: bool) -> None:
        agent.set_options(auto_title=True)  # an interactive session is titled (title plugin)
        self.agent = agent
        self.fold = TranscriptFold(cost=self.runtime.llm.cost)
        printer = TranscriptPrinter(self.console, self.tools, self.fold)
        events = list(agent.session.events)
        if replay:
            printer.replay(events)
        else:
            for event in events:
                self.fold.apply(event)
        self._unsubscribe = agent.session.subscribe(printer, from_seq=len(events))
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

    async def detach(self) -> None:
        agent, self.agent = self.agent, None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if agent is not None:
            await close_agent(self.runtime, agent)

    async def pick_session(self) -> str | None:
        return await pick_session(self)

    # ------------------------------------------------------------------ CommandHost

    def show(self, text: str, *, level: str = "info") -> None:
        self.console.print(Text(text, style=LEVEL_STYLES.get(level, level)), soft_wrap=True)

    async def new_session(self) -> None:
        await start_new_session(self, self.runtime)

    async def open_session(self, session_id: str | None) -> None:
        await switch_session(self, self.runtime, session_id)

    async def quit(self) -> None:
        self.quitting = True

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        if not isinstance(self.reader, PromptReader):
            return None  # a script's next line is its next prompt, not an answer
        marked = [f"{item} (current)" if i == current else item for i, item in enumerate(items)]
        return await self.dialogs.choose(title, marked)
