"""Agent profiles: Markdown files that say what a kind of subagent is for and how it works.

``$DSH_HOME/agents/NAME.md`` holds the user's, a trusted project's ``.dsh/agents/`` its
own (a project's wins over a user's of the same name); a trusted project's
``.claude/agents/`` is read too, below ``.dsh/agents/``, so profiles written for other
agents work unchanged. The front matter is the format they use: ``name`` (default: the
file's stem), ``description`` (what the model reads to choose one), ``tools`` (a comma
list or a YAML list; none: every tool the parent has), ``model`` (none or ``inherit``:
the parent's); the body is the instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dsh_plugins._shared import definitions
from dsh_plugins._shared.definitions import Skipped, read_definition

MAX_BYTES = 256 * 1024
"""A profile larger than this is left out."""
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

ALIASES = {
    "multiedit": "edit",
    "ls": "glob",
    "bashoutput": "job_output",
    "killshell": "job_kill",
    "killbash": "job_kill",
    "askuserquestion": "ask_user_question",
}
"""Other agents' tool names whose dsh tool is not their snake_case form."""


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    origin: str
    """``user`` or ``project``."""
    description: str
    tools: tuple[str, ...] | None
    """dsh tool names it may use; None: all the parent has."""
    model: str | None
    instructions: str


def roots(home: Path, project: Path | None) -> list[tuple[str, Path]]:
    """``(origin, folder)`` pairs, weakest first: a later folder's profile replaces an
    earlier one's of the same name."""
    found = [("user", home / "agents")]
    if project is not None:
        found.append(("project", project / ".claude" / "agents"))
        found.append(("project", project / ".dsh" / "agents"))
    return found


def scan(home: Path, project: Path | None) -> tuple[dict[str, Profile], list[Skipped]]:
    """Every profile, by name; and the files left out, with why. ``project`` is the
    project root only when it is trusted (an untrusted project offers none). Only a
    folder's own files: its subfolders are not read."""
    return definitions.scan(roots(home, project), lambda path, _, origin: load(path, origin))


def load(path: Path, origin: str) -> Profile | Skipped:
    read = read_definition(path, MAX_BYTES)
    if isinstance(read, Skipped):
        return read
    fields, body = read
    name = " ".join(fields.get("name", "").split()) or path.stem
    name = name.lower()
    if not NAME.match(name):
        return Skipped(path, f"{name!r} cannot be a profile name (a-z, 0-9, - and _)")
    description = " ".join(fields.get("description", "").split())
    if not description:
        return Skipped(path, "it has no description (the model chooses a profile by it)")
    model = fields.get("model", "").strip() or None
    if model is not None and model.lower() == "inherit":
        model = None
    return Profile(
        name=name,
        path=path,
        origin=origin,
        description=description,
        tools=tool_names(fields["tools"]) if "tools" in fields else None,
        model=model,
        instructions=body.strip(),
    )


def tool_names(value: str) -> tuple[str, ...] | None:
    """The dsh tools a ``tools`` value names: ``Read, Grep`` (a comma list), ``[Read,
    Grep]`` or a YAML list (folded by the front-matter reader into ``- Read - Grep``).
    Other agents' names become dsh's (``WebFetch`` is ``web_fetch``). ``*`` or an
    empty value: None, every tool."""
    words = [w.strip("'\"") for w in re.split(r"[\s,\[\]]+", value) if w and w != "-"]
    words = [w for w in words if w.strip("'\"")]
    if not words or "*" in words:
        return None
    names: list[str] = []
    for word in words:
        name = dsh_tool_name(word)
        if name not in names:
            names.append(name)
    return tuple(names)


def dsh_tool_name(word: str) -> str:
    """``Read`` → ``read``, ``WebFetch`` → ``web_fetch``; an MCP tool's or a dsh tool's
    own name stays as it is."""
    if word.startswith("mcp__") or word.islower():
        return word
    alias = ALIASES.get(word.lower())
    if alias is not None:
        return alias
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", word).lower()
