"""Where custom commands live and how a file becomes one.

``$DSH_HOME/commands/`` holds the user's, a trusted project's ``.dsh/commands/`` its
own (a project's wins over a user's of the same name). Claude Code's folders are read
the same way when ``[claude_code] read`` is on (the default): the user's
``~/.claude/commands/`` (``$CLAUDE_CONFIG_DIR/commands/``) and a trusted project's
``.claude/commands/``; dsh's own win over them on a name clash. Each ``NAME.md`` is the
command ``/NAME``; a file in a folder is namespaced by it: ``frontend/review.md`` is
``/frontend:review``. Names are lower-cased; a file whose name cannot be a command
name (``my notes.md``) is left out and said so in ``/help``'s listing.

The front matter is the format other agents use: ``description``, ``argument-hint``,
``model``, ``allowed-tools``; the body is the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsh.commands import COMMAND_NAME
from dsh_plugins._shared import definitions
from dsh_plugins._shared.definitions import Skipped, markdown_files, read_definition

MAX_BYTES = 256 * 1024
"""A command file larger than this is left out (it is a prompt, not a document)."""
MAX_DEPTH = 4
"""Folders entered under a commands folder (each a namespace)."""


@dataclass(frozen=True)
class CommandFile:
    name: str
    path: Path
    origin: str
    """``user`` or ``project`` (for Claude Code's folders too)."""
    description: str
    hint: str
    model: str | None
    allowed_tools: str | None
    body: str


def roots(home: Path, project: Path | None, claude: Path | None = None) -> list[tuple[str, Path]]:
    """``(origin, folder)`` pairs, lowest first, a later folder's file replacing an
    earlier one's of the same name: Claude Code's (``claude``, the user's Claude Code
    folder, when they are read), the user's, then the project's."""
    found: list[tuple[str, Path]] = []
    if claude is not None:
        found.append(("user", claude / "commands"))
        if project is not None:
            found.append(("project", project / ".claude" / "commands"))
    found.append(("user", home / "commands"))
    if project is not None:
        found.append(("project", project / ".dsh" / "commands"))
    return found


def scan(
    home: Path, project: Path | None, claude: Path | None = None
) -> tuple[dict[str, CommandFile], list[Skipped]]:
    """Every command file, by command name; and the files left out, with why."""
    return definitions.scan(roots(home, project, claude), _load, max_depth=MAX_DEPTH)


def command_name(parts: list[str]) -> str:
    """The command a file's place names: ``frontend/Review.md`` is ``frontend:review``."""
    return ":".join(part.lower() for part in parts)


def _load(path: Path, parts: list[str], origin: str) -> CommandFile | Skipped:
    name = command_name(parts)
    if not COMMAND_NAME.match(name):
        return Skipped(path, f"/{name} cannot be a command name")
    return load(name, path, origin)


def untrusted_names(project: Path) -> list[str]:
    """The command names an untrusted project's folders (``.dsh/commands/``,
    ``.claude/commands/``) would make: from the files' names alone, none of which is
    read, so that ``/name`` can say why it does not run."""
    names = []
    for folder in (project / ".claude" / "commands", project / ".dsh" / "commands"):
        for _, parts in markdown_files(folder, max_depth=MAX_DEPTH):
            name = command_name(parts)
            if COMMAND_NAME.match(name):
                names.append(name)
    return sorted(set(names))


def fingerprint(
    home: Path, project: Path | None, claude: Path | None = None
) -> tuple[tuple[str, int, int], ...]:
    """What changes when a command file is added, removed or written: each folder's and
    file's path, modification time and size (without reading a file)."""
    found: list[tuple[str, int, int]] = []
    for _, root in roots(home, project, claude):
        files = markdown_files(root, max_depth=MAX_DEPTH)
        for path in (root, *(path for path, _ in files)):
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def load(name: str, path: Path, origin: str) -> CommandFile | Skipped:
    read = read_definition(path, MAX_BYTES)
    if isinstance(read, Skipped):
        return read
    fields, body = read
    if not body.strip():
        return Skipped(path, "the prompt is empty")
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    description = " ".join(fields.get("description", "").split()) or first[:80]
    return CommandFile(
        name=name,
        path=path,
        origin=origin,
        description=description,
        hint=" ".join(fields.get("argument-hint", "").split()),
        model=fields.get("model", "").strip() or None,
        allowed_tools=" ".join(fields.get("allowed-tools", "").split()) or None,
        body=body.strip(),
    )
