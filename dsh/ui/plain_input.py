"""The one input line of plain mode, shared by the prompt and the dialogs.

Plain mode reads lines from a prompt-toolkit ``PromptSession`` on a terminal, or
straight from stdin when it is not one (a script, a file, a pipe). The main loop
keeps a prompt open even while a turn runs (a line typed then steers the turn);
an approval or a question borrows the line: :meth:`Lines.dialog` cancels the open
prompt (keeping what was typed as a draft), the dialog asks its own questions, and
the prompt comes back with the draft once it is done. While a prompt is open on a
terminal, output goes above it (:func:`above_prompt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app_or_none
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from prompt_toolkit.shortcuts import CompleteStyle
from rich.console import Console
from rich.text import Text

from dsh.commands import Command
from dsh.control_chars import is_terminal, visible
from dsh.ui.prompt_history import history_path

if TYPE_CHECKING:
    from dsh.agent import MentionChoice

Message = str | Callable[[], str]
MAX_PATH_COMPLETIONS = 200


class Interrupted(Exception):
    """Ctrl+C on a prompt. (prompt-toolkit raises ``KeyboardInterrupt``, which must
    not escape a task: asyncio would re-raise it out of the event loop.)"""


class LineReader(Protocol):
    """Reads one line. Raises ``EOFError`` at the end of input and
    ``KeyboardInterrupt`` for Ctrl+C (on a terminal)."""

    async def read(self, message: Message, *, default: str = "", dialog: bool = False) -> str: ...

    def draft(self) -> str:
        """What is typed on the open prompt and not yet sent."""
        ...

    def set_aside(self) -> None:
        """The open main prompt is about to be cancelled for a dialog: it should leave
        no line behind (it comes back below the dialog, with its draft)."""
        ...

    def close(self) -> None: ...


class PromptReader:
    """prompt-toolkit prompts: history and completion on the main prompt; dialogs get
    a second session so their answers (``y``, ``2``) stay out of the history."""

    def __init__(
        self,
        *,
        input: Input | None = None,
        output: Output | None = None,
        history: History | None = None,
        completer: Completer | None = None,
    ) -> None:
        self.main: PromptSession[str] = PromptSession(
            input=input,
            output=output,
            history=history or InMemoryHistory(),
            completer=completer,
            complete_while_typing=False,  # Tab completes; no popups for screen readers
            complete_style=CompleteStyle.READLINE_LIKE,
            reserve_space_for_menu=0,  # no blank lines pushed below the prompt
        )
        self.dialogs: PromptSession[str] = PromptSession(
            input=input, output=output, reserve_space_for_menu=0
        )

    async def read(self, message: Message, *, default: str = "", dialog: bool = False) -> str:
        session = self.dialogs if dialog else self.main
        try:
            return await session.prompt_async(message, default=default)
        finally:
            session.app.erase_when_done = False  # a line sent stays on screen

    def draft(self) -> str:
        return self.main.default_buffer.text

    def set_aside(self) -> None:
        # Without this the cancelled prompt is drawn "done": a stray "» " line above
        # the dialog.
        self.main.app.erase_when_done = True

    def close(self) -> None:
        pass


class StreamReader:
    """Lines from a stream that is not a terminal (a script fed on stdin), read by a
    thread so the event loop never blocks; each line read is echoed after its prompt
    so a log shows what was answered."""

    _EOF = object()

    def __init__(self, stream: TextIO, console: Console) -> None:
        self.stream = stream
        self.console = console
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def pump() -> None:
            try:
                for line in iter(stream.readline, ""):
                    loop.call_soon_threadsafe(self.queue.put_nowait, line.rstrip("\r\n"))
            except (OSError, ValueError):
                pass
            with contextlib.suppress(RuntimeError):  # the loop closed first
                loop.call_soon_threadsafe(self.queue.put_nowait, self._EOF)

        threading.Thread(target=pump, name="dsh-plain-stdin", daemon=True).start()

    async def read(self, message: Message, *, default: str = "", dialog: bool = False) -> str:
        item = await self.queue.get()
        if item is self._EOF:
            self.queue.put_nowait(item)  # every later read ends too
            raise EOFError
        assert isinstance(item, str)
        prompt = message() if callable(message) else message
        self.console.print(Text(f"{prompt}{item}", style="dim"), soft_wrap=True)
        return item

    def draft(self) -> str:
        return ""

    def set_aside(self) -> None:
        pass

    def close(self) -> None:
        pass


class Lines:
    """The main prompt and the dialogs, taking turns on one reader."""

    def __init__(self, reader: LineReader) -> None:
        self.reader = reader
        self._turn = asyncio.Lock()
        self._free = asyncio.Event()
        self._free.set()
        self._main: asyncio.Task[str] | None = None
        self._preempted: asyncio.Task[str] | None = None
        self._draft = ""

    async def next_line(self, message: Message) -> str:
        """The next line typed on the main prompt (waiting while a dialog runs)."""
        while True:
            await self._free.wait()
            task = asyncio.ensure_future(self._read(message, default=self._draft))
            self._main = task
            try:
                line = await task
            except asyncio.CancelledError:
                if self._preempted is task and not self._current_task_cancelling():
                    self._preempted = None
                    continue
                raise
            except Interrupted:
                self._draft = ""
                raise
            finally:
                self._main = None
            self._draft = ""
            return line

    @staticmethod
    def _current_task_cancelling() -> bool:
        current = asyncio.current_task()
        return current is not None and current.cancelling() > 0

    @contextlib.asynccontextmanager
    async def dialog(self) -> AsyncIterator[None]:
        """Borrow the line: one dialog at a time; the main prompt waits meanwhile."""
        async with self._turn:
            self._free.clear()
            try:
                main = self._main
                if main is not None and not main.done():
                    self._draft = self.reader.draft()
                    self.reader.set_aside()
                    self._preempted = main
                    main.cancel()
                    await asyncio.wait({main})
                yield
            finally:
                self._free.set()

    async def ask(self, message: str) -> str:
        """A dialog's question (call inside :meth:`dialog`)."""
        return await self._read(message, dialog=True)

    async def _read(self, message: Message, *, default: str = "", dialog: bool = False) -> str:
        try:
            return await self.reader.read(message, default=default, dialog=dialog)
        except KeyboardInterrupt:
            raise Interrupted from None


class AbovePrompt:
    """``sys.stdout`` while plain mode's prompt may be open: every complete line is
    written at once, above the prompt (erased first and drawn again below it).

    prompt-toolkit's ``patch_stdout`` hands lines to a thread that writes them up to
    0.2 s later; a dialog's question printed just before its prompt opened could then
    land below that prompt, already answered by a fast typist or a script."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._held = ""  # an unfinished line: written with its newline, or on flush
        self._thread = threading.get_ident()

    def write(self, data: str) -> int:
        complete, newline, self._held = (self._held + data).rpartition("\n")
        if newline:
            self._emit(complete + newline)
        return len(data)

    def flush(self) -> None:
        held, self._held = self._held, ""
        if held:
            self._emit(held)

    def _emit(self, text: str) -> None:
        app = get_app_or_none()
        running = app is not None and app.is_running
        if running and threading.get_ident() != self._thread:
            # The prompt belongs to the loop's thread: write there, in order.
            assert app is not None
            app.loop.call_soon_threadsafe(self._emit, text)  # type: ignore[union-attr]
            return
        if app is not None and running:
            app.renderer.erase()  # the cursor back where the prompt began
        self.stream.write(text)
        self.stream.flush()
        if app is not None and running:
            app.invalidate()  # the prompt again, below what was written

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


@contextlib.contextmanager
def above_prompt() -> Iterator[None]:
    """Output to ``sys.stdout`` goes above the open prompt instead of through it."""
    original = sys.stdout
    proxy = AbovePrompt(original)
    sys.stdout = proxy
    try:
        yield
    finally:
        proxy.flush()
        sys.stdout = original


# ---------------------------------------------------------------- history, completion


def file_history(home: Path, cwd: Path) -> History:
    try:
        return FileHistory(str(history_path(home, cwd)))
    except OSError:  # an unwritable home: remember this run only
        return InMemoryHistory()


class PlainCompleter(Completer):
    """``/commands`` at the start of the line, ``@paths`` (relative to the session's
    directory) anywhere."""

    def __init__(
        self,
        commands: Callable[[str], list[Command]],
        cwd: Callable[[], Path],
        mentions: Callable[[str], Awaitable[Sequence[MentionChoice]]] | None = None,
    ) -> None:
        self.commands = commands
        self.cwd = cwd
        self.mentions = mentions
        """What the plugins offer for an ``@query`` besides paths (an MCP resource)."""

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and not any(c.isspace() for c in before):
            for command in self.commands(before[1:]):
                yield Completion(
                    f"/{command.name}",
                    start_position=-len(before),
                    display_meta=command.description,
                )
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@"):
            for path in path_completions(self.cwd(), word[1:]):
                yield Completion(f"@{path}", start_position=-len(word))

    async def get_completions_async(
        self, document: Document, complete_event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        for completion in self.get_completions(document, complete_event):
            yield completion
        word = document.get_word_before_cursor(WORD=True)
        if self.mentions is None or not word.startswith("@"):
            return
        for choice in await self.mentions(word[1:]):
            if choice.usable():
                meta = visible(choice.meta, one_line=True)
                yield Completion(choice.insert, start_position=-len(word), display_meta=meta)


def path_completions(cwd: Path, partial: str) -> Iterator[str]:
    """Entries of the folder ``partial`` names whose name starts with its last part;
    folders end with ``/``. Hidden ones only when asked for with a leading dot."""
    folder, _, base = partial.rpartition("/")
    where = cwd / folder if folder else cwd
    prefix = f"{folder}/" if folder else ""
    try:
        names = sorted(entry for entry in where.iterdir() if entry.name.startswith(base))
    except OSError:
        return
    count = 0
    for entry in names:
        if entry.name.startswith(".") and not base.startswith("."):
            continue
        suffix = "/" if _is_dir(entry) else ""
        yield f"{prefix}{entry.name}{suffix}"
        count += 1
        if count >= MAX_PATH_COMPLETIONS:
            return


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def stdin_is_terminal() -> bool:
    return is_terminal(sys.stdin)
