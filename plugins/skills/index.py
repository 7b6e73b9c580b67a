"""Finding skills: the roots, their entries, and a cache keyed by each file's stat.

A skill is ``<root>/<name>/SKILL.md`` (its folder may hold scripts and references the
instructions point to) or ``<root>/<name>.md``. Roots, most specific first:
``<project>/.dsh/skills``, ``<project>/.agents/skills``, configured folders, then
``$DSH_HOME/skills``; the project is the nearest ancestor of the working directory
holding ``.git``, else the working directory. When two roots hold the same name, the
more specific one wins, so a project can override a user's skill.

Scanning happens at every step (the catalog is a context entry) and every ``skill``
call, so it only lists the roots and stats each file; a file is read again only when
its modification time or size changed. A skill that cannot be used (a bad name,
broken front matter, no description) is left out and logged once per version of its
file; ``/skills`` lists these problems too.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dsh.tools.files import read_regular_file
from dsh_plugins._shared.frontmatter import FrontMatterError, parse_bool, split_front_matter

_log = logging.getLogger("dsh.plugins.skills")

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_FILE_BYTES = 256 * 1024
ENTRY_FILE = "SKILL.md"


def valid_name(name: str) -> bool:
    """Kebab-case: lower-case letters and digits in words joined by single hyphens."""
    return len(name) <= MAX_NAME and NAME.match(name) is not None


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    when_to_use: str | None
    path: Path
    """The file: ``SKILL.md`` in the skill's folder, or ``<name>.md``."""
    base_dir: Path
    """What relative references in the instructions are relative to."""
    body: str
    """The instructions: the file without its front matter."""
    model_invocable: bool = True
    """False with ``disable-model-invocation: true``: only the person may use it."""
    user_invocable: bool = True


@dataclass(frozen=True)
class Problem:
    path: Path
    reason: str


@dataclass(frozen=True)
class Scan:
    skills: dict[str, Skill]
    """By name, sorted by name; each name's most specific skill."""
    problems: tuple[Problem, ...] = ()

    def model_skills(self) -> list[Skill]:
        return [skill for skill in self.skills.values() if skill.model_invocable]


def project_root(cwd: Path) -> Path:
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():  # a file in worktrees and submodules
            return folder
    return cwd


def skill_roots(
    cwd: Path, home: Path, extra: Sequence[Path] = (), agents_dirs: bool = True
) -> list[Path]:
    """Where skills are looked for, most specific first, each folder once."""
    project = project_root(cwd.absolute())
    roots = [project / ".dsh" / "skills"]
    if agents_dirs:
        roots.append(project / ".agents" / "skills")
    roots.extend(folder if folder.is_absolute() else project / folder for folder in extra)
    roots.append(home / "skills")
    unique: dict[object, Path] = {}
    for root in roots:
        unique.setdefault(_identity(root), root)
    return list(unique.values())


def _identity(folder: Path) -> object:
    """The same for two names of one folder: its device and inode (one ``stat``, where
    resolving the name would look at each of its parts, at every step); a folder that
    does not exist holds no skills and is known by its name."""
    try:
        found = os.stat(folder)
    except OSError:
        return os.path.normpath(folder)
    return (found.st_dev, found.st_ino)


def _entries(root: Path) -> Iterable[tuple[str, Path, Path]]:
    """``(entry name, file, base directory)`` of each candidate in ``root``, by name."""
    try:
        listed = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return  # no such folder (the usual case), or unreadable: no skills there
    for entry in listed:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir():
                skill_file = path / ENTRY_FILE
                if skill_file.is_file():
                    yield entry.name, skill_file, path
            elif entry.name.endswith(".md") and entry.name.lower() != "readme.md":
                yield entry.name[: -len(".md")], path, root
        except OSError:
            continue


def load_skill(entry_name: str, path: Path, base_dir: Path, text: str) -> Skill:
    """The skill a file describes; raises :class:`FrontMatterError` (or ValueError)
    saying why it cannot be used."""
    fields, body = split_front_matter(text)
    name = fields.get("name", "").strip() or entry_name
    if not valid_name(name):
        raise ValueError(
            f"{name!r} is not a valid skill name (kebab-case, at most {MAX_NAME} characters)"
        )
    description = " ".join(fields.get("description", "").split())
    if not description:
        raise ValueError("its front matter has no description")
    when = " ".join(fields.get("when-to-use", "").split()) or None
    disabled = fields.get("disable-model-invocation")
    user = fields.get("user-invocable")
    return Skill(
        name=name,
        description=description,
        when_to_use=when,
        path=path,
        base_dir=base_dir,
        body=body.strip(),
        model_invocable=not parse_bool(disabled, "disable-model-invocation") if disabled else True,
        user_invocable=parse_bool(user, "user-invocable") if user else True,
    )


@dataclass
class SkillIndex:
    """Scans roots for skills, keeping what it read by ``(path, mtime, size)``."""

    home: Path
    extra: tuple[Path, ...] = ()
    agents_dirs: bool = True
    _read: dict[Path, tuple[tuple[int, int], Skill | Problem]] = field(default_factory=dict)
    _reported: set[tuple[Path, tuple[int, int]]] = field(default_factory=set)

    def scan(self, cwd: Path) -> Scan:
        skills: dict[str, Skill] = {}
        problems: list[Problem] = []
        for root in skill_roots(cwd, self.home, self.extra, self.agents_dirs):
            in_root: set[str] = set()
            for entry_name, path, base_dir in _entries(root):
                found = self._load(entry_name, path, base_dir)
                if isinstance(found, Problem):
                    problems.append(found)
                elif found.name in in_root:
                    problems.append(
                        Problem(path, f"another skill in {root} is named {found.name!r}")
                    )
                else:
                    in_root.add(found.name)
                    skills.setdefault(found.name, found)  # a more specific root came first
        return Scan(dict(sorted(skills.items())), tuple(problems))

    def _load(self, entry_name: str, path: Path, base_dir: Path) -> Skill | Problem:
        try:
            stat = path.stat()
        except OSError as error:
            return Problem(path, f"cannot be read: {error.strerror or error}")
        version = (stat.st_mtime_ns, stat.st_size)
        cached = self._read.get(path)
        if cached is not None and cached[0] == version:
            return cached[1]
        found: Skill | Problem
        if stat.st_size > MAX_FILE_BYTES:
            found = Problem(path, f"larger than {MAX_FILE_BYTES // 1024} KiB")
        else:
            try:
                text = read_regular_file(path).decode("utf-8", errors="replace")
                found = load_skill(entry_name, path, base_dir, text)
            except OSError as error:
                found = Problem(path, f"cannot be read: {error.strerror or error}")
            except (FrontMatterError, ValueError) as error:
                found = Problem(path, str(error))
        self._read[path] = (version, found)
        if isinstance(found, Problem) and (path, version) not in self._reported:
            self._reported.add((path, version))
            _log.warning("skill %s left out: %s", path, found.reason)
        return found
