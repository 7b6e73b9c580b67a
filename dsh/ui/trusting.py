"""Settling a project's trust before the runtime starts, the same in every front end.

When the folder ships configuration that would change what dsh does and the user
has not decided about it yet, an interactive front end asks once (the TUI's trust
dialog, a text question in plain mode) and the answer is recorded in the trust
store. Headless runs never ask: what the folder would widen is ignored, with one
line naming each ignored key, unless ``--trust`` is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh.control_chars import visible
from dsh.narrowing import Ignored
from dsh.settings import Settings, check_core_tables

TrustAnswer = Literal["trust", "distrust", "later"]
"""Trust (recorded), don't trust (recorded: not asked again), or decide later (this
run goes untrusted, and the question comes back next time)."""


@dataclass(frozen=True)
class TurnedOn:
    """Something the folder holds that dsh uses only in a trusted folder."""

    path: str
    """Where it is, relative to the folder (``.dsh/commands/``)."""
    what: str
    """What trusting turns on with it."""


PROJECT_FILES: tuple[tuple[str, bool, str], ...] = (
    (".dsh/commands", True, "its slash commands (a command's `!` lines run when it is used)"),
    (".claude/commands", True, "its slash commands (a command's `!` lines run when it is used)"),
    (".mcp.json", False, "the MCP servers it names: programs started, addresses reached"),
    (".dsh/agents", True, "its subagent profiles (instructions, tools, models)"),
    (".claude/agents", True, "its subagent profiles (instructions, tools, models)"),
    (".env", False, "the keys in it, which dsh may then send to a provider"),
)
"""What a trusted folder's own files turn on beside its settings (the plugins and the
credential store read them only when ``settings.trusted``; docs/settings.md): the
path, whether it is a folder, and what it does."""


def turned_on_by_trust(root: Path) -> tuple[TurnedOn, ...]:
    """The files of :data:`PROJECT_FILES` that ``root`` holds (links not followed: a
    name is enough for the question to mention it)."""
    found = []
    for name, folder, what in PROJECT_FILES:
        path = root / name
        if folder and path.is_dir() and not path.is_symlink():
            found.append(TurnedOn(f"{name}/", what))
        elif not folder and path.is_file():
            found.append(TurnedOn(name, what))
    return tuple(found)


@dataclass(frozen=True)
class TrustQuestion:
    root: Path
    """The folder the answer is for (a git root, else the working directory)."""
    project: Path | None
    """The project settings file, if there is one."""
    ignored: tuple[Ignored, ...]
    """Exactly what trusting would change in the settings."""
    turned_on: tuple[TurnedOn, ...] = ()
    """What else of the folder's trusting turns on (its commands, MCP servers...)."""


Asker = Callable[[TrustQuestion], Awaitable[TrustAnswer]]


async def settle(settings: Settings, home: Path, *, ask: Asker | None = None) -> Settings:
    """The settings to start with: ``settings`` as loaded (``--trust`` already applied,
    see :func:`dsh.settings.load_settings`), checked, and with the project's trust
    decided. ``ask`` is the front end's question, None when nobody can answer
    (headless, a script). Nothing is read again: trusting re-layers the documents
    already read (:meth:`Settings.decided`)."""
    await asyncio.to_thread(check_core_tables, settings)
    if not settings.ignored or settings.trust != "unknown" or ask is None:
        return settings
    assert settings.root is not None
    turned_on = await asyncio.to_thread(turned_on_by_trust, settings.root)
    answer = await ask(TrustQuestion(settings.root, settings.project, settings.ignored, turned_on))
    if answer == "later":
        return settings
    from dsh.trust import TrustStore

    await asyncio.to_thread(TrustStore(home).decide, settings.root, answer == "trust")
    if answer == "trust":
        return await asyncio.to_thread(settings.decided, True)
    return settings


def ignored_lines(settings: Settings) -> list[str]:
    """One line per key not applied, for stderr or a notice; first, which Claude Code
    files were read and what of them dsh does not apply (:mod:`dsh.claude_code`)."""
    root = visible(str(settings.root), one_line=True)
    after = f"{root} is not trusted (`dsh trust` or --trust applies it)"
    never = "a project's settings, trusted or not, may only narrow it"
    claude = [visible(line, one_line=True) for line in settings.claude_notes]
    return claude + [
        f"ignored {item.line()} from {_source(item, settings)}; "
        f"{after if item.trust_applies else never}"
        for item in settings.ignored
    ]


def _source(item: Ignored, settings: Settings) -> str:
    return visible(item.origin or str(settings.project), one_line=True)


def ignored_summary(settings: Settings) -> str | None:
    """The keys not applied, in one notice for an interactive UI (after the lines
    about Claude Code's files, when any were read)."""
    claude = "\n".join(visible(line, one_line=True) for line in settings.claude_notes)
    if not settings.ignored:
        return claude or None
    keys = ", ".join(item.key for item in settings.ignored)
    count = len(settings.ignored)
    settings_are = "1 of its settings is" if count == 1 else f"{count} of its settings are"
    said = f"This folder is not trusted, so {settings_are} not applied: {keys}."
    if any(item.trust_applies for item in settings.ignored):
        said += " `dsh trust` applies them."
    never = [item.key for item in settings.ignored if not item.trust_applies]
    if never:
        said += f" A project may only narrow {', '.join(never)}, even trusted."
    return f"{claude}\n{said}" if claude else said
