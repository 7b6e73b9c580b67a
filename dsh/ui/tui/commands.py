"""Commands only the TUI has: ``/theme``, ``/copy`` and ``/agents``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App

from dsh.commands import Command, CommandContext, CommandError, CommandView

if TYPE_CHECKING:
    from dsh.ui.children import ChildSession
    from dsh.ui.entries import TranscriptFold

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
"""What ``/help`` says of the TUI's keys."""

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def register_tui_commands(
    app: App[Any],
    commands: CommandView,
    fold: Callable[[], TranscriptFold | None],
    *,
    view_session: Callable[[str, str | None], Awaitable[None]],
    home: Path,
) -> None:
    """``/theme``, ``/copy`` and ``/agents`` for ``app``, in ``commands`` (the app's own
    view); ``fold`` is the transcript on screen, which ``/copy`` copies from;
    ``view_session`` opens a session's transcript read-only (``/agents``); ``home``
    holds the user's settings, where ``/theme`` keeps its choice."""

    async def theme(context: CommandContext, args: str) -> None:
        name = args.strip()
        names = sorted(app.available_themes)
        if not name:
            picked = await pick_theme(app, names)
            if picked is None:
                return
            name = picked
        if name not in app.available_themes:
            raise CommandError(f"no theme {name!r}; themes: {', '.join(names)}")
        app.theme = name
        from dsh.settings import USER_FILE
        from dsh.settings_files import SettingsError
        from dsh.settings_tui import save_tui_choice

        try:
            # Kept for the next start, as [tui] theme in the user's settings.
            path = await asyncio.to_thread(save_tui_choice, home / USER_FILE, "theme", name)
        except SettingsError as error:
            context.host.show(f"Theme: {name}, for this run only: {error}", level="warning")
            return
        context.host.show(f"Theme: {name}. Saved as [tui] theme in {path}.")

    async def copy(context: CommandContext, args: str) -> None:
        from dsh.ui.tui.clipboard import copy_text, last_answers

        shown = fold()
        if shown is None:
            raise CommandError("nothing to copy yet")
        text = pick_text(last_answers(shown.entries), args)
        # The system clipboard tool may take a moment: not on the UI's loop.
        said = await asyncio.to_thread(copy_text, app, text)
        context.host.show(said[:1].upper() + said[1:] + ".")

    async def agents(context: CommandContext, args: str) -> None:
        from dsh.agent.service import AGENTS
        from dsh.session.store import SESSIONS
        from dsh.ui.children import child_sessions

        parent = context.agent.session.id
        children = await child_sessions(
            context.root.get(SESSIONS), context.root.get(AGENTS).list(), parent
        )
        if not children:
            context.host.show("No subagents have run in this session.")
            return
        picked = await pick_child(app, children)
        if picked is not None:
            await view_session(picked.id, picked.title)

    for command in (
        Command(
            "agents",
            "list the subagents this session ran; the one picked opens read-only",
            agents,
            recorded=False,
        ),
        Command(
            "theme",
            "switch the theme (alone: pick one, seen as you move)",
            theme,
            "[name]",
            recorded=False,
        ),
        Command(
            "copy",
            "copy the last reply (N: the N-th last; code [N]: its N-th code block)",
            copy,
            "[N | code [N]]",
            recorded=False,
        ),
    ):
        commands.register(command.name, command)


async def pick_theme(app: App[Any], names: list[str]) -> str | None:
    """The theme the person picks; each one highlighted is shown at once, and Esc
    puts the theme of before back."""
    from dsh.ui.tui.dialogs import choose

    before = app.theme

    def preview(index: int) -> None:
        app.theme = names[index]

    current = names.index(before) if before in names else None
    picked = await choose(app, "Theme", names, current=current, preview=preview)
    if picked is None:
        app.theme = before
        return None
    return names[picked]


async def pick_child(app: App[Any], children: list[ChildSession]) -> ChildSession | None:
    """The child session the person picks (newest first), or None."""
    from rich.text import Text

    from dsh.control_chars import visible
    from dsh.ui.tui.dialogs import choose

    items: list[str | Text] = []
    for child in children:
        style = {"failed": "red", "cancelled": "yellow", "running": "cyan"}.get(child.status, "")
        items.append(
            Text.assemble(
                visible(child.title, one_line=True)[:100],
                "  ",
                (child.status, style or "dim"),
                (f"  {child.id[:8]}", "dim"),
            )
        )
    picked = await choose(
        app,
        "Subagents of this session",
        items,
        hint="↑↓ choose · Enter: open its transcript (read-only) · Esc: close",
    )
    return None if picked is None else children[picked]


def pick_text(answers: list[str], args: str) -> str:
    """What ``/copy args`` copies from ``answers`` (newest first)."""
    words = args.split()
    code = bool(words) and words[0] == "code"
    if code:
        words = words[1:]
    try:
        number = int(words[0]) if words else 1
    except ValueError:
        raise CommandError("usage: /copy [N] or /copy code [N]") from None
    if not answers:
        raise CommandError("no reply to copy yet")
    if not code:
        if not 1 <= number <= len(answers):
            raise CommandError(f"there are {len(answers)} replies; pick 1 to {len(answers)}")
        return answers[number - 1]
    blocks = _FENCE.findall(answers[0])
    if not blocks:
        raise CommandError("the last reply has no code block")
    if not 1 <= number <= len(blocks):
        raise CommandError(f"the last reply has {len(blocks)} code blocks")
    return str(blocks[number - 1])
