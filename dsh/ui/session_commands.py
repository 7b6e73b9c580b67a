"""The session commands of an interactive front end, and the words they say.

``/new``, ``/resume``, ``/fork``, ``/status``, ``/help`` and ``/quit`` act on the front
end's :class:`~dsh.ui.session_controller.SessionController`, not on the conversation:
none is recorded in the session. They are registered in the front end's context
(:meth:`SessionController.add_session_commands`), so they go with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dsh.commands import Command, CommandView
    from dsh.sandbox import SandboxStatus
    from dsh.ui.user_interface import UserInterface


class SessionHost(Protocol):
    """What the commands ask of the controller."""

    @property
    def ui(self) -> UserInterface: ...

    @property
    def commands(self) -> CommandView: ...

    async def new_session(self) -> None: ...

    async def open_session(self, session_id: str | None) -> None: ...

    async def fork_session(self, turn: int | None, *, code: bool = False) -> None: ...

    async def quit(self) -> None: ...

    async def sandbox_status(self) -> SandboxStatus: ...


def register_session_commands(
    host: SessionHost, keys: str, status_line: Callable[[], str | None]
) -> None:
    """``/help`` lists the commands, then ``keys``; ``/status`` says ``status_line()``
    (the front end's line on the session on screen; nothing while none is shown),
    then the sandbox's state."""
    from dsh.commands import Command, CommandContext

    async def new(context: CommandContext, args: str) -> None:
        await host.new_session()

    async def resume(context: CommandContext, args: str) -> None:
        await host.open_session(args or None)

    async def fork(context: CommandContext, args: str) -> None:
        words = args.split()
        code = "--code" in words
        words = [word for word in words if word != "--code"]
        await host.fork_session(parse_turn("fork", " ".join(words)), code=code)

    async def quit_(context: CommandContext, args: str) -> None:
        await host.quit()

    async def help_(context: CommandContext, args: str) -> None:
        host.ui.show(help_text(host.commands.complete(""), keys))

    async def status(context: CommandContext, args: str) -> None:
        said = status_line()
        if said is None:
            return
        host.ui.show(f"{said}\n{sandbox_line(await host.sandbox_status())}")

    for command in (
        Command("new", "start a new session", new, recorded=False),
        Command("resume", "resume a session of this folder", resume, "[id]", recorded=False),
        Command(
            "fork",
            "continue in a new session from a turn (default: the last); --code "
            "also puts the files back as they were then",
            fork,
            "[turn] [--code]",
            recorded=False,
        ),
        Command(
            "status",
            "model, tokens, context and cost so far, and the sandbox",
            status,
            recorded=False,
        ),
        Command("help", "list the commands and keys", help_, recorded=False),
        Command("quit", "leave dsh", quit_, recorded=False, quits=True),
    ):
        host.commands.register(command.name, command)


def sandbox_line(status: SandboxStatus) -> str:
    """``/status``'s line on the sandbox: the policy and what enforces it, or why
    nothing does."""
    summary = status.summary()
    if status.active:
        return f"{summary} ({status.backend}: {status.program})"
    if status.reason is not None:
        return f"{summary}: {status.reason}"
    return summary


def help_text(commands: list[Command], keys: str) -> str:
    """``/help``: each command with its arguments and description, then ``keys``."""
    width = max((len(c.name) + len(c.arguments) for c in commands), default=0) + 3
    lines = ["Commands:"]
    for command in commands:
        label = f"/{command.name} {command.arguments}".rstrip()
        lines.append(f"  {label.ljust(width)} {command.description}")
    if keys:
        lines.append(keys)
    return "\n".join(lines)


def ago(timestamp: int, now: float) -> str:
    """How long ago an epoch time (milliseconds, or seconds) was, roughly."""
    seconds = now - (timestamp / 1000 if timestamp > 100_000_000_000 else timestamp)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def parse_turn(command: str, args: str) -> int | None:
    """A command's optional turn number (``/fork 3``): None when none is given; a
    CommandError saying how to write one otherwise."""
    from dsh.commands import CommandError

    text = args.strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise CommandError(f"/{command} takes a turn number, as in /{command} 2 (not {text!r})")
    return int(text)
