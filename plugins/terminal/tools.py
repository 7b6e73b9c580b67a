"""The ``terminal_*`` tools: open a program in a pty, type into it, read what it
printed (waiting for quiet, a pattern or its exit), look at its screen, signal it,
list and close terminals. Terminals belong to the session that opened them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal as signals
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from dsh.sandbox import SandboxUnavailable, Widening, Wrapped
from dsh.services import SANDBOX
from dsh.tools import (
    Action,
    CallResult,
    Presentation,
    Risk,
    ScreenView,
    TextView,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    child_environment,
)
from dsh.tools.protected import command_protections
from dsh.tools.shell import SHELLS, analyse
from dsh_plugins.terminal.keys import KeyError_, key_bytes
from dsh_plugins.terminal.terminal import Terminal
from dsh_plugins.terminal.typing import typed as typing_into

SIGNALS = {"INT", "TERM", "KILL", "HUP", "TSTP", "QUIT", "CONT"}
SHELL = ["bash", "--noprofile", "--norc", "+H", "-i"]
"""An interactive bash without start-up files and without history expansion (``!!``
would make a line run words of earlier ones): what is typed is what runs."""


class Settings(BaseModel):
    model_config = {"extra": "forbid"}

    max_terminals: int = Field(default=8, ge=1, le=64)
    """Open terminals per session."""
    scrollback_chars: int = Field(default=4_000_000, ge=10_000)
    default_rows: int = Field(default=40, ge=5, le=200)
    default_cols: int = Field(default=160, ge=20, le=500)


class Terminals:
    """The ``terminals`` service: every open terminal, by owning session."""

    def __init__(self, settings: Settings, passthrough: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.passthrough = passthrough
        """The user's own ``[plugins.bash] env_passthrough``: secrets a shell gets."""
        self._terminals: dict[str, Terminal] = {}
        self._counter = 0

    def of(self, owner: str) -> list[Terminal]:
        return [t for t in self._terminals.values() if t.owner == owner]

    def get(self, owner: str, terminal_id: str) -> Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None or terminal.owner != owner:
            known = ", ".join(t.id for t in self.of(owner)) or "none open"
            raise ToolError(f"unknown terminal {terminal_id!r} ({known})", "TERMINAL_NOT_FOUND")
        return terminal

    def screen(self, owner: str, terminal_id: str) -> tuple[list[str], tuple[int, int]]:
        """For UIs: the rows and cursor of a terminal's screen now."""
        return self.get(owner, terminal_id).snapshot()

    def open(
        self,
        owner: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        rows: int,
        cols: int,
        name: str,
        wrapped: Wrapped | None = None,
    ) -> Terminal:
        if len(self.of(owner)) >= self.settings.max_terminals:
            raise ToolError(
                f"{self.settings.max_terminals} terminals are open already; close one first",
                "TERMINAL_LIMIT",
            )
        self._counter += 1
        terminal = Terminal(
            f"t{self._counter}",
            owner,
            argv,
            cwd=cwd,
            env=env,
            rows=rows,
            cols=cols,
            name=name,
            max_log_chars=self.settings.scrollback_chars,
            wrapped=wrapped,
        )
        self._terminals[terminal.id] = terminal
        return terminal

    async def close(self, terminal: Terminal) -> None:
        self._terminals.pop(terminal.id, None)
        await terminal.close()

    async def close_owner(self, owner: str) -> None:
        await asyncio.gather(*(self.close(t) for t in self.of(owner)))

    async def aclose(self) -> None:
        await asyncio.gather(*(self.close(t) for t in list(self._terminals.values())))


# ---------------------------------------------------------------------- arguments


class OpenArguments(BaseModel):
    command: str = Field(
        default="",
        description="the program to run, as a shell command line; empty: an interactive bash",
    )
    cwd: str = Field(default="", description="working directory, relative to the project")
    rows: int | None = Field(default=None, ge=5, le=200, description="screen height")
    cols: int | None = Field(default=None, ge=20, le=500, description="screen width")
    name: str = Field(default="", description="a short label")

    @field_validator("command", "cwd")
    @classmethod
    def _no_nul(cls, value: str, info: ValidationInfo) -> str:
        # Both go to the operating system as C strings, which end at the first NUL.
        if "\x00" in value:
            raise ValueError(f"{info.field_name} must not contain a NUL character")
        return value


class SendArguments(BaseModel):
    terminal_id: str = Field(description="the terminal, such as t1")
    text: str = Field(default="", description="text typed as is")
    keys: list[str] = Field(
        default_factory=list,
        description="named keys pressed after the text: Enter, Tab, Esc, Up, Down, Left, "
        "Right, Backspace, C-c, C-d, …",
    )

    @model_validator(mode="after")
    def _something(self) -> SendArguments:
        if not self.text and not self.keys:
            raise ValueError("send some text or at least one key")
        return self


class ReadArguments(BaseModel):
    terminal_id: str
    wait: Literal["none", "quiet", "pattern", "exit"] = Field(
        default="quiet",
        description="return at once, once output goes quiet, once a regex matches the new "
        "output, or once the program exits",
    )
    pattern: str = Field(default="", description="the regex for wait=pattern")
    timeout_ms: int = Field(default=5_000, ge=0, le=60_000)
    quiet_ms: int = Field(default=300, ge=50, le=10_000)
    max_bytes: int = Field(default=32_768, ge=256, le=262_144)

    @model_validator(mode="after")
    def _pattern(self) -> ReadArguments:
        if self.wait == "pattern":
            if not self.pattern:
                raise ValueError("wait=pattern needs a pattern")
            try:
                re.compile(self.pattern)
            except re.error as error:
                raise ValueError(f"bad pattern: {error}") from None
        return self


class TerminalArguments(BaseModel):
    terminal_id: str


class SignalArguments(BaseModel):
    terminal_id: str
    signal: str = Field(description="INT, TERM, KILL, HUP, TSTP, QUIT or CONT")


class NoArguments(BaseModel):
    pass


# ---------------------------------------------------------------------- waiting


async def wait_for(
    terminal: Terminal,
    arguments: ReadArguments,
    stop: asyncio.Event,
) -> str:
    """Wait as asked; returns how the wait ended."""
    deadline = time.monotonic() + arguments.timeout_ms / 1000
    began = time.monotonic()
    pattern = re.compile(arguments.pattern) if arguments.wait == "pattern" else None
    while True:
        if arguments.wait == "none":
            return "none"
        if arguments.wait == "exit" and not terminal.running:
            return "exited"
        if pattern is not None and pattern.search(terminal.unread()):
            return "pattern matched"
        if arguments.wait == "quiet":
            quiet_since = max(terminal.last_output, began)
            if time.monotonic() - quiet_since >= arguments.quiet_ms / 1000:
                return "quiet"
        if arguments.wait != "exit" and not terminal.running:
            return "exited"
        left = deadline - time.monotonic()
        if left <= 0:
            return f"timeout after {arguments.timeout_ms} ms"
        if stop.is_set():
            return "cancelled"
        terminal.changed.clear()
        step = min(left, 0.05 if arguments.wait == "quiet" else 0.25)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(terminal.changed.wait(), step)


def _output(terminal: Terminal, max_chars: int) -> str:
    text, lost = terminal.take(max_chars)
    note = f"[{lost:,} earlier characters not shown]\n" if lost else ""
    return note + (text if text else "(no new output)")


def _meta(terminal: Terminal) -> dict[str, Any]:
    rows, cursor = terminal.snapshot()
    return {
        "terminal": terminal.id,
        "screen": rows,
        "cursor": list(cursor),
        "status": "running" if terminal.running else "exited",
        "exit_code": terminal.exit_code,
    }


def _typed_bytes(arguments: SendArguments) -> bytes:
    try:
        return arguments.text.encode() + b"".join(key_bytes(k) for k in arguments.keys)
    except KeyError_ as error:
        raise ToolError(str(error), "TERMINAL_BAD_KEY") from None


def repl_program(command: str) -> str | None:
    """The program whose input a terminal opened with ``command`` takes, when that is
    one plain program and not a shell; None: what is typed is judged as commands."""
    if not command.strip():
        return None
    analysis = analyse(command)
    if len(analysis.invocations) != 1 or analysis.unchecked or analysis.hidden:
        return None
    name = analysis.invocations[0].layers[-1].program
    return None if name is None or name in SHELLS else name


def _status_line(terminal: Terminal) -> str:
    return f"[terminal {terminal.id}: {terminal.status()}]"


def present_screen(arguments: dict[str, Any], result: CallResult) -> Presentation:
    meta = result.meta if isinstance(result.meta, dict) else {}
    if result.is_error or "screen" not in meta:
        return TextView(title=f"terminal {arguments.get('terminal_id', '')}", body=result.text)
    cursor = meta.get("cursor") or None
    return ScreenView(
        title=f"terminal {meta.get('terminal')}",
        rows=tuple(str(r) for r in meta.get("screen", [])),
        cursor=(int(cursor[0]), int(cursor[1])) if cursor else None,
        status=str(meta.get("status")),
    )


# ---------------------------------------------------------------------- tools


async def contain(
    context: ToolContext,
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    widening: Widening | None = None,
) -> Wrapped | None:
    """``argv`` as the sandbox starts it (None when the runtime has no sandbox, as in
    tests of the terminal alone); ``widening`` is what an approved escalation adds.
    When the sandbox cannot start, the terminal does not open."""
    services = context.services
    sandbox = services.get(SANDBOX, None) if services is not None else None
    if sandbox is None:
        return None
    try:
        return await sandbox.wrap(argv, cwd=cwd, env=env, widening=widening)
    except SandboxUnavailable as error:
        raise ToolError(
            f"The terminal did not open: the sandbox cannot start ({error}).",
            "SANDBOX_UNAVAILABLE",
        ) from error


def terminal_tools(service: Terminals) -> list[ToolDefinition]:
    def owner(context: ToolContext) -> str:
        return str(context.session_id)

    async def open_(arguments: OpenArguments, context: ToolContext) -> ToolOutput:
        cwd = (context.cwd / arguments.cwd).resolve() if arguments.cwd else context.cwd
        if not cwd.is_dir():
            raise ToolError(f"no such directory: {arguments.cwd}", "TERMINAL_BAD_CWD")
        argv = ["bash", "-c", arguments.command] if arguments.command.strip() else SHELL
        env = child_environment(os.environ, passthrough=service.passthrough)
        env.update(
            TERM="xterm-256color",
            PS1="$ ",
            # Readline's own key bindings, not the user's: which keys run a line is known.
            INPUTRC="/dev/null",
            DSH_SESSION_ID=owner(context),
            COLUMNS=str(arguments.cols or service.settings.default_cols),
            LINES=str(arguments.rows or service.settings.default_rows),
        )
        wrapped = await contain(context, argv, cwd, env, context.widening)
        try:
            terminal = service.open(
                owner(context),
                argv,
                cwd,
                env,
                arguments.rows or service.settings.default_rows,
                arguments.cols or service.settings.default_cols,
                arguments.name or arguments.command or "bash",
                wrapped,
            )
        except OSError as error:
            raise ToolError(f"could not start the terminal: {error}", "TERMINAL_SPAWN") from None
        terminal.repl = repl_program(arguments.command)
        if arguments.command.strip() and terminal.repl is None:
            # A shell started by a command reads start-up files (aliases, functions,
            # options) dsh does not, or lines go to a program dsh cannot name.
            terminal.meaning.changed = (
                f"was started as `{arguments.command[:60]}`, which dsh does not follow"
            )
        settle = ReadArguments(terminal_id=terminal.id, wait="quiet", timeout_ms=2_000)
        await wait_for(terminal, settle, context.signal)
        head = f"started terminal {terminal.id} ({terminal.name}), {terminal.cols}x{terminal.rows}"
        text = f"{head}\n{_output(terminal, 8_192)}\n{_status_line(terminal)}"
        return ToolOutput(content=text, meta=_meta(terminal))

    async def send(arguments: SendArguments, context: ToolContext) -> ToolOutput:
        terminal = service.get(owner(context), arguments.terminal_id)
        if not terminal.running:
            raise ToolError(
                f"terminal {terminal.id} has {terminal.status()}; open another",
                "TERMINAL_EXITED",
            )
        data = _typed_bytes(arguments)
        if terminal.repl is None:
            into = typing_into(terminal.line, data.decode(errors="replace"))
            terminal.line = into.rest
            if into.unknown is not None:
                # Approved, but what ran is unknown: so is what it defined.
                terminal.meaning.changed = (
                    terminal.meaning.changed or "ran a line dsh could not read"
                )
            elif into.command is not None:
                terminal.meaning.ran(into.command)
        terminal.write(data)
        settle = ReadArguments(
            terminal_id=terminal.id, wait="quiet", timeout_ms=2_000, quiet_ms=200
        )
        await wait_for(terminal, settle, context.signal)
        text = f"{_output(terminal, 16_384)}\n{_status_line(terminal)}"
        return ToolOutput(content=text, meta=_meta(terminal))

    async def read(arguments: ReadArguments, context: ToolContext) -> ToolOutput:
        terminal = service.get(owner(context), arguments.terminal_id)
        ended = await wait_for(terminal, arguments, context.signal)
        text = f"{_output(terminal, arguments.max_bytes)}\n[wait: {ended}] {_status_line(terminal)}"
        return ToolOutput(content=text, meta=_meta(terminal))

    async def snapshot(arguments: TerminalArguments, context: ToolContext) -> ToolOutput:
        terminal = service.get(owner(context), arguments.terminal_id)
        rows, (row, col) = terminal.snapshot()
        numbered = "\n".join(f"{n + 1:>3}| {line}" for n, line in enumerate(rows))
        text = (
            f"screen of {terminal.id} ({terminal.cols}x{terminal.rows}), cursor at row "
            f"{row + 1}, column {col + 1}:\n{numbered}\n{_status_line(terminal)}"
        )
        return ToolOutput(content=text, meta=_meta(terminal))

    async def signal(arguments: SignalArguments, context: ToolContext) -> str:
        terminal = service.get(owner(context), arguments.terminal_id)
        name = arguments.signal.strip().upper().removeprefix("SIG")
        if name not in SIGNALS:
            raise ToolError(
                f"unknown signal {arguments.signal!r}: one of {', '.join(sorted(SIGNALS))}",
                "TERMINAL_BAD_SIGNAL",
            )
        if not terminal.running:
            raise ToolError(f"terminal {terminal.id} has {terminal.status()}", "TERMINAL_EXITED")
        terminal.send_signal(signals.Signals[f"SIG{name}"])
        return f"sent SIG{name} to the foreground program of {terminal.id}"

    async def list_(arguments: NoArguments, context: ToolContext) -> str:
        terminals = service.of(owner(context))
        if not terminals:
            return "(no terminals)"
        now = time.monotonic()
        return "\n".join(
            f"{t.id}  {t.name}  {t.cols}x{t.rows}  {t.status()}  {now - t.started:.0f} s"
            for t in terminals
        )

    async def close(arguments: TerminalArguments, context: ToolContext) -> str:
        terminal = service.get(owner(context), arguments.terminal_id)
        await service.close(terminal)
        return f"closed {terminal.id}: {terminal.status()}"

    def runs(
        summary: str,
        command: str | None = None,
        cwd: str = "",
        *,
        context: Any,
        target: str | None = None,
    ) -> Action:
        workdir = (context.cwd / cwd).resolve() if cwd else None  # as open_ resolves it
        return Action(
            risk="exec",
            summary=summary,
            command=command,
            workdir=workdir,
            target=target,
            sandboxed=True,
        )

    def typed(arguments: SendArguments, context: ToolContext) -> Action:
        summary = f"type into {arguments.terminal_id}: {shlex.quote(arguments.text)}"
        summary = f"{summary} {' '.join(arguments.keys)}".strip()
        # What is typed is a command line too: naming dsh's keys refuses it (the
        # policy denies reading them in every mode).
        refused = [p.path for p in command_protections(arguments.text, context.cwd) if p.refused]
        terminal = service.get(owner(context), arguments.terminal_id)
        if terminal.repl is not None:
            return Action(
                risk="exec",
                summary=summary,
                reads=tuple(refused),
                target=terminal.repl,
                sandboxed=True,
            )
        into = typing_into(terminal.line, _typed_bytes(arguments).decode(errors="replace"))
        if into.command is None:
            # Nothing runs before Enter; keys that edit the line are still the user's call,
            # and keys that may run it (C-o) are asked every time.
            risk: Risk = "read" if into.rest is not None and into.unknown is None else "exec"
            return Action(
                risk=risk,
                summary=summary,
                reads=tuple(refused),
                target="shell",
                unchecked=into.unknown,
                sandboxed=risk == "exec",
            )
        return Action(
            risk="exec",
            summary=summary,
            details=into.command,
            command=into.command,
            reads=tuple(refused),
            unchecked=into.unknown or terminal.meaning.judge(into.command),
            workdir=terminal.current_cwd(),  # where git would find its repository
            sandboxed=True,
            typed=True,
        )

    return [
        ToolDefinition(
            name="terminal_open",
            description=(
                "Start a program in a pseudo-terminal (default: an interactive bash) for "
                "interactive or long-running work: REPLs, prompts, full-screen programs. "
                "Returns its id and first output. Terminals last until closed."
            ),
            arguments=OpenArguments,
            execute=open_,
            kind="execute",
            # An interactive shell alone runs nothing yet: what is typed into it is
            # judged when it is typed. A command is judged as bash would run it.
            describe=lambda a, c: runs(
                f"terminal: {a.command or 'bash'}",
                a.command if a.command.strip() else None,
                a.cwd,
                context=c,
                target=None if a.command.strip() else "shell",
            ),
            present_result=present_screen,
        ),
        ToolDefinition(
            name="terminal_send",
            description=(
                "Type text and/or press named keys in a terminal. Returns what the program "
                "printed within a moment; use terminal_read to wait longer."
            ),
            arguments=SendArguments,
            execute=send,
            kind="execute",
            describe=typed,
            present_result=present_screen,
        ),
        ToolDefinition(
            name="terminal_read",
            description=(
                "Read a terminal's output since the last read (escape codes removed), "
                "waiting for quiet, a regex, or the program's exit, up to a timeout."
            ),
            arguments=ReadArguments,
            execute=read,
            read_only=True,
            present_result=present_screen,
        ),
        ToolDefinition(
            name="terminal_snapshot",
            description="The terminal's screen as it looks now, with the cursor position "
            "(for full-screen programs such as less, top or curses menus).",
            arguments=TerminalArguments,
            execute=snapshot,
            read_only=True,
            present_result=present_screen,
        ),
        ToolDefinition(
            name="terminal_signal",
            description="Send a signal (INT, TERM, KILL, HUP, TSTP, QUIT, CONT) to the "
            "program in the foreground of a terminal.",
            arguments=SignalArguments,
            execute=signal,
            kind="execute",
            describe=lambda a, c: runs(f"signal {a.signal} to {a.terminal_id}", context=c),
        ),
        ToolDefinition(
            name="terminal_list",
            description="The terminals this session has open.",
            arguments=NoArguments,
            execute=list_,
            read_only=True,
        ),
        ToolDefinition(
            name="terminal_close",
            description="Close a terminal, ending its program and everything it started.",
            arguments=TerminalArguments,
            execute=close,
            describe=lambda a, c: Action(risk="read", summary=f"close {a.terminal_id}"),
        ),
    ]
