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

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dsh.commands import COMMAND_NAME
from dsh.tools.files import FileTooLarge, read_regular_file
from dsh_plugins._shared.frontmatter import FrontMatterError, split_front_matter

MAX_BYTES = 256 * 1024
"""A command file larger than this is left out (it is a prompt, not a document)."""
MAX_DEPTH = 4


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


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


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
    commands: dict[str, CommandFile] = {}
    skipped: list[Skipped] = []
    for origin, root in roots(home, project, claude):
        for path, parts in _markdown_files(root):
            name = ":".join(part.lower() for part in parts)
            if not COMMAND_NAME.match(name):
                skipped.append(Skipped(path, f"/{name} cannot be a command name"))
                continue
            loaded = load(name, path, origin)
            if isinstance(loaded, Skipped):
                skipped.append(loaded)
            else:
                commands[name] = loaded
    return commands, skipped


def untrusted_names(project: Path) -> list[str]:
    """The command names an untrusted project's folders (``.dsh/commands/``,
    ``.claude/commands/``) would make: from the files' names alone, none of which is
    read, so that ``/name`` can say why it does not run."""
    names = []
    for folder in (project / ".claude" / "commands", project / ".dsh" / "commands"):
        for _, parts in _markdown_files(folder):
            name = ":".join(part.lower() for part in parts)
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
        for path in (root, *(path for path, _ in _markdown_files(root))):
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def load(name: str, path: Path, origin: str) -> CommandFile | Skipped:
    try:
        text = read_regular_file(path, MAX_BYTES).decode("utf-8")
    except FileTooLarge:
        return Skipped(path, f"larger than {MAX_BYTES // 1024} KB")
    except (OSError, UnicodeDecodeError) as error:
        return Skipped(path, f"cannot be read ({error})")
    try:
        fields, body = split_front_matter(text)
    except FrontMatterError as error:
        return Skipped(path, str(error))
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


def _markdown_files(root: Path, parts: tuple[str, ...] = ()) -> Iterator[tuple[Path, list[str]]]:
    """Each ``.md`` file under ``root`` (symlinked folders not followed), with the
    names that make its command: the folders, then the file's stem."""
    if len(parts) > MAX_DEPTH:
        return
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _markdown_files(Path(entry.path), (*parts, entry.name))
        elif entry.name.endswith(".md") and entry.is_file():
            yield Path(entry.path), [*parts, entry.name[: -len(".md")]]
