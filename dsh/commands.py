"""Slash commands: what a person types as ``/name args`` in a UI.

Commands live in the ``commands`` service (a scoped registry, like tools), so a plugin
adds its own with ``ctx.get(COMMANDS).register(name, Command(...))`` and they go away
with it. A UI registers the commands only it can carry out (``/theme``, ``/copy``) the
same way. Running one gets a :class:`CommandContext`: the agent of the session on
screen, the runtime's root context, and the UI's :class:`CommandHost`, which shows
text and does what only a UI can (start a new session, open the session picker).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from dsh.agent_handle import AgentHandle
from dsh.kernel import Context, Gather, RegistryView, ScopedRegistry, ServiceKey
from dsh.session.payloads import CommandDone, CommandRun

# Underscores and 64 characters: a plugin's commands may carry names made of others'
# (an MCP server's prompt), as tools' names do.
# A name may hold ":" between parts: a namespace (``/frontend:review``, a command file
# in a folder of its own).
COMMAND_NAME = re.compile(r"^(?=.{1,64}$)[a-z][a-z0-9_-]*(?::[a-z0-9][a-z0-9_-]*)*$")
COMMAND_LINE = re.compile(r"^/([a-z][a-z0-9_-]*(?::[a-z0-9][a-z0-9_-]*)*)(?:\s+(.*))?$", re.S)


class CommandError(Exception):
    """A command could not do what was asked; the message is shown to the person."""


class CommandHost(Protocol):
    """What a UI offers the commands it runs."""

    def show(self, text: str, *, level: str = "info") -> None:
        """Show a line (or a few) to the person, outside the transcript the model sees."""

    async def new_session(self) -> None: ...

    async def open_session(self, session_id: str | None) -> None:
        """Switch to a session: ``None`` asks the person to pick one."""

    async def quit(self) -> None: ...

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        """The index of the item the person picks, or None: they closed the list, or
        nobody is there to ask (headless, a script on stdin)."""

    @property
    def attended(self) -> bool:
        """Somebody answers :meth:`choose`, so its None is their "no". False where
        nobody can be asked (``dsh -p``, a script on stdin, an editor, whose protocol
        has no list to pick from): the command line is then the confirmation."""
        ...


@dataclass
class CommandContext:
    agent: AgentHandle
    """The agent of the session on screen."""
    root: Context
    host: CommandHost
    extras: dict[str, Any] = field(default_factory=dict)


Run = Callable[[CommandContext, str], Awaitable[None]]


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    run: Run
    """Called with the context and the text after the name (``""`` if none)."""
    arguments: str = ""
    """A hint shown in completion, such as ``[name]``."""
    hidden: bool = False
    recorded: bool = True
    """Log ``command/run`` and ``command/done`` in the session (not for UI-only
    commands such as ``/theme``)."""
    quits: bool = False
    """It ends dsh (``/exit``): not offered where dsh cannot end itself (an editor's
    agent, whose sessions the editor ends)."""

    def __post_init__(self) -> None:
        if not COMMAND_NAME.match(self.name):
            raise ValueError(f"command name {self.name!r} must match {COMMAND_NAME.pattern}")


def parse_command(text: str) -> tuple[str, str] | None:
    """``/name args`` as ``(name, args)``; None when the text is not a command."""
    match = COMMAND_LINE.match(text.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


class CommandService(ScopedRegistry[Command]):
    def __init__(self) -> None:
        super().__init__("command")

    def bind_context(self, ctx: Context) -> CommandView:
        return CommandView(self, ctx)

    def complete(
        self, prefix: str, scope: object | None = None, *, quitting: bool = True
    ) -> list[Command]:
        """Visible commands whose name starts with ``prefix`` (no slash), by name;
        those that end dsh only where it can end (``quitting``)."""
        found = [
            command
            for name, command in self.visible(scope).items()
            if name.startswith(prefix) and not command.hidden and (quitting or not command.quits)
        ]
        return sorted(found, key=lambda command: command.name)

    async def run(self, text: str, context: CommandContext) -> bool:
        """Run the command ``text`` names. False when it names no command (the caller
        tells the person). A failure (a :class:`CommandError`) of a recorded command
        is in its ``command/done`` event, which the UIs show; of another, the host
        shows it."""
        parsed = parse_command(text)
        if parsed is None:
            return False
        name, args = parsed
        command = self.get(name, context.agent)
        if command is None:
            return False
        session = context.agent.session if command.recorded else None
        command_id = uuid.uuid4().hex
        if session is not None:
            session.append(
                "command/run", CommandRun(command_id=command_id, name=name, args=args or None)
            )
        failure: str | None = None
        try:
            await command.run(context, args)
        except CommandError as error:
            failure = str(error)
        except asyncio.CancelledError:
            failure = f"/{name} was cancelled"
            raise
        except Exception as error:  # a broken command must not take the UI down
            failure = f"/{name} failed: {type(error).__name__}: {error}"
        finally:
            if session is not None:
                kind: Literal["success", "error"] = "error" if failure is not None else "success"
                session.append(
                    "command/done", CommandDone(command_id=command_id, kind=kind, text=failure)
                )
        if failure is not None and session is None:
            # A recorded failure is shown from the log (its command/done event), once;
            # an unrecorded one only here.
            context.host.show(failure, level="error")
        return True


class CommandView(RegistryView[Command]):
    """The commands service as one context sees it: what it registers goes with it."""

    __slots__ = ()

    @property
    def service(self) -> CommandService:
        registry = self._registry
        assert isinstance(registry, CommandService)
        return registry

    def complete(self, prefix: str, *, quitting: bool = True) -> list[Command]:
        return self.service.complete(prefix, self._ctx.scope, quitting=quitting)

    async def run(self, text: str, context: CommandContext) -> bool:
        return await self.service.run(text, context)


COMMANDS_SETTLE: Gather[[], None] = Gather(
    "commands/settle",
    doc="a /word names no command yet and is about to be refused: a plugin whose "
    "commands are still coming (an MCP server starting, whose prompts are commands) "
    "returns once they are there or failed",
)


COMMANDS: ServiceKey[CommandView] = ServiceKey("commands")
"""Slash commands (``register``)."""
