"""Commands only the TUI has: ``/theme`` and ``/copy``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.app import App

from dsh.commands import Command, CommandContext, CommandError, CommandView

if TYPE_CHECKING:
    from dsh.ui.entries import TranscriptFold

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def register_tui_commands(
    app: App[Any], commands: CommandView, fold: Callable[[], TranscriptFold | None]
) -> None:
    """``/theme`` and ``/copy`` for ``app``, in ``commands`` (the app's own view);
    ``fold`` is the transcript on screen, which ``/copy`` copies from."""

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
        context.host.show(f"Theme: {name}.")

    async def copy(context: CommandContext, args: str) -> None:
        from dsh.ui.tui.clipboard import copy_text, last_answers

        shown = fold()
        if shown is None:
            raise CommandError("nothing to copy yet")
        text = pick_text(last_answers(shown.entries), args)
        # The system clipboard tool may take a moment: not on the UI's loop.
        said = await asyncio.to_thread(copy_text, app, text)
        context.host.show(said[:1].upper() + said[1:] + ".")

    for command in (
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
