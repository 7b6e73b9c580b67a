"""What the prompt offers to complete: ``/commands`` and ``@paths``.

A ``/`` completes only at the very start of the prompt; an ``@`` anywhere after a
space. Paths are matched fuzzily (rapidfuzz) against the project's files, listed
once in a thread: dot folders, ``.gitignore``'d paths and well-known bulky folders
are left out, and the list stops at :data:`MAX_FILES`. Plugins may offer more for
an ``@`` (an MCP server's resources, through the ``prompt/mentions`` hook):
:func:`with_mentions` puts them among the files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsh.regular_files import read_regular_file

if TYPE_CHECKING:
    from dsh.commands import Command

MAX_FILES = 5000
MAX_CHOICES = 8
MAX_GITIGNORE_BYTES = 1024 * 1024
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "target", "dist", "build"})
_MENTION = re.compile(r"(?:^|\s)@(\S*)$")


@dataclass(frozen=True)
class Token:
    kind: str
    """``command`` or ``path``."""
    start: int
    """Column where the token (with its ``/`` or ``@``) starts on the cursor's row."""
    query: str


@dataclass(frozen=True)
class Choice:
    insert: str
    label: str
    meta: str = ""
    more: bool = False
    """``insert`` is a prefix to go on from: no space after it, the menu stays."""


def token_at(row: int, before_cursor: str) -> Token | None:
    """The completable token ending at the cursor, given the text before it on its row."""
    if row == 0 and before_cursor.startswith("/") and not any(c.isspace() for c in before_cursor):
        return Token("command", 0, before_cursor[1:])
    match = _MENTION.search(before_cursor)
    if match is not None:
        return Token("path", match.start(1) - 1, match.group(1))
    return None


def command_choices(commands: Callable[[str], Sequence[Command]], query: str) -> list[Choice]:
    return [
        Choice(f"/{c.name}", f"/{c.name} {c.arguments}".rstrip(), c.description)
        for c in commands(query)
    ][:MAX_CHOICES]


def path_choices(files: Sequence[str], query: str) -> list[Choice]:
    """The files best matching ``query``: prefix matches of the path or its name
    first, then rapidfuzz's best."""
    if not query:
        picked = sorted(files, key=lambda p: (p.count("/"), p))[:MAX_CHOICES]
        return [Choice(f"@{p}", p) for p in picked]
    lowered = query.lower()
    prefix = [
        p for p in files if p.lower().startswith(lowered) or _name(p).lower().startswith(lowered)
    ]
    prefix.sort(key=lambda p: (len(p), p))
    picked = prefix[:MAX_CHOICES]
    if len(picked) < MAX_CHOICES:
        from rapidfuzz import fuzz, process

        seen = set(picked)
        for path, _score, _index in process.extract(
            query, files, scorer=fuzz.WRatio, limit=MAX_CHOICES * 2, score_cutoff=50
        ):
            if path not in seen:
                picked.append(path)
                seen.add(path)
            if len(picked) == MAX_CHOICES:
                break
    return [Choice(f"@{p}", p) for p in picked]


def with_mentions(files: list[Choice], offered: Sequence[Choice], query: str) -> list[Choice]:
    """The files' choices and the plugins' for ``@query``: a plugin's first when the
    query names its scheme (``server:``) or the choice starts with it, else after the
    files."""
    lowered = query.lower()
    first = [c for c in offered if ":" in query or c.insert[1:].lower().startswith(lowered)]
    rest = [c for c in offered if c not in first]
    return [*first, *files, *rest][:MAX_CHOICES]


def _name(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def list_files(root: Path, limit: int = MAX_FILES) -> list[str]:
    """Paths under ``root`` (relative, ``/``-separated; folders end with ``/``)
    worth mentioning. Blocking: run it in a thread."""
    ignored = _gitignore(root)
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        keep = []
        for name in sorted(dirs):
            path = prefix + name + "/"
            if name.startswith(".") or name in SKIPPED_DIRS or (ignored and ignored(path)):
                continue
            keep.append(name)
            found.append(path)
        dirs[:] = keep
        for name in sorted(files):
            path = prefix + name
            if ignored and ignored(path):
                continue
            found.append(path)
        if len(found) >= limit:
            return found[:limit]
    return found


def _gitignore(root: Path) -> Callable[[str], bool] | None:
    try:
        data = read_regular_file(root / ".gitignore", MAX_GITIGNORE_BYTES)
    except OSError:  # none, too large, or a pipe that would hang the thread
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    import pathspec

    spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
    return spec.match_file
