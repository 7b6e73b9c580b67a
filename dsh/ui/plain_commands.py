"""The commands both interactive UIs register (``/new``, ``/resume``, ``/status``,
``/help``, ``/quit``) and plain mode's numbered session picker behind a bare
``/resume``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from dsh.commands import Command, CommandContext, CommandError, CommandView
from dsh.ui.entries import TranscriptFold
from dsh.ui.render import render_status

if TYPE_CHECKING:
    from dsh.ui.plain import PlainApp

RECENT_SESSIONS = 10
PLAIN_KEYS = (
    "Keys: Enter sends (while a turn runs, it steers the turn) · Ctrl+C cancels the turn"
    " or clears the line · Ctrl+D quits · Tab completes /commands and @paths"
)


class UiHost(Protocol):
    """What the shared commands need of a UI."""

    commands: CommandView

    @property
    def fold(self) -> TranscriptFold | None: ...

    def show(self, text: str, *, level: str = "info") -> None: ...


def register_commands(app: UiHost, keys: str = PLAIN_KEYS) -> None:
    """Registered in the app's own context, so they go away with it. None is
    recorded in the session: they act on the UI, not on the conversation. ``keys``
    ends the ``/help`` text."""

    async def new(context: CommandContext, args: str) -> None:
        await context.host.new_session()

    async def resume(context: CommandContext, args: str) -> None:
        await context.host.open_session(args or None)

    async def quit_(context: CommandContext, args: str) -> None:
        await context.host.quit()

    async def help_(context: CommandContext, args: str) -> None:
        app.show(help_text(app.commands.complete(""), keys))

    async def status(context: CommandContext, args: str) -> None:
        if app.fold is not None:
            app.show(render_status(app.fold.status, queued=len(app.fold.queued)).plain)

    for command in (
        Command("new", "start a new session", new, recorded=False),
        Command("resume", "resume a session of this folder", resume, "[id]", recorded=False),
        Command("status", "model, tokens, context and cost so far", status, recorded=False),
        Command("help", "list the commands and keys", help_, recorded=False),
        Command("quit", "leave dsh", quit_, recorded=False),
    ):
        app.commands.register(command.name, command)


async def pick_session(app: PlainApp) -> str | None:
    """The recent sessions of the folder, numbered; the id of the one picked."""
    sessions = app.runtime.sessions
    catalog = sessions.catalog
    if catalog is None:
        raise CommandError("no session catalog to list sessions from; give an id")
    await sessions.index_missing()
    recent = await catalog.list(cwd=str(app.cwd), limit=RECENT_SESSIONS)
    if not recent:
        app.show(f"No sessions in {app.cwd} yet.")
        return None
    now = time.time()
    current = app.agent.id if app.agent is not None else None
    items = [
        f"{entry.display_title} · {entry.turns} turn{'' if entry.turns == 1 else 's'} · "
        f"{ago(entry.updated_at, now)} · "
        f"{entry.id[:8]}" + (" (this one)" if entry.id == current else "")
        for entry in recent
    ]
    choice = await app.dialogs.choose("Recent sessions here:", items)
    return recent[choice].id if choice is not None else None


def help_text(commands: list[Command], keys: str = PLAIN_KEYS) -> str:
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
