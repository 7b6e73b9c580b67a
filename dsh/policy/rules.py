"""Permission rules as objects: ``tool(pattern)`` read once into a :class:`Rule`,
and what a rule says about a path. Settings, a custom command's ``allowed-tools``, a
hook's allow and a signed grant all arrive here as text once, and travel as rules
from then on (:mod:`dsh.policy.permissions` judges calls by them)."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh.policy.action import Action, ToolNames

Kind = Literal["bash", "edit", "read", "tool"]

_RULE = re.compile(r"^\s*([A-Za-z*][\w*-]*)\s*(?:\((.*)\))?\s*$", re.S)


class RuleError(ValueError):
    """A rule that cannot be read; the message quotes it."""


@dataclass(frozen=True)
class Rule:
    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        match = _RULE.match(text)
        if not match:
            raise RuleError(f"cannot read permission rule {text!r}: write it as tool(pattern)")
        pattern = match.group(2)
        return cls(match.group(1), pattern.strip() if pattern is not None else None)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    @property
    def kind(self) -> Kind:
        return self.tool if self.tool in ("bash", "edit", "read") else "tool"  # type: ignore[return-value]

    @property
    def any(self) -> bool:
        return self.pattern is None or self.pattern == "*"

    def command_words(self) -> tuple[tuple[str, ...], bool]:
        """The pattern's words, and whether it is a prefix (``:*``)."""
        return _command_words(self.pattern or "")

    def applies(self, tool: ToolNames, action: Action) -> bool:
        """Whether this rule speaks about ``tool``'s call at all."""
        match self.kind:
            case "bash":
                return action.command is not None
            case "edit":
                return bool(action.paths)
            case "read":
                return bool(action.reads)
        # A tool answers to its own name and to Claude Code's (``WebFetch``), so a
        # rule written for Claude Code means the same tool here.
        return any(fnmatch.fnmatchcase(name, self.tool) for name in tool.names)

    def matches_path(self, path: Path, cwd: Path) -> bool:
        if self.pattern is None:
            return True
        return any(glob_path(self.pattern, form) for form in path_forms(path, cwd))


@functools.lru_cache(maxsize=1024)
def _command_words(pattern: str) -> tuple[tuple[str, ...], bool]:
    prefix = pattern.endswith(":*")
    if prefix:
        pattern = pattern[:-2]
    try:
        words = shlex.split(pattern)
    except ValueError:
        words = pattern.split()
    return tuple(words), prefix


def parse_rules(text: str) -> list[Rule]:
    """Rules separated by commas (``bash(ls:*), bash(grep:*)``), as a grant is shown."""
    rules: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            rules.append("".join(current))
            current = []
            continue
        current.append(char)
    rules.append("".join(current))
    return [Rule.parse(rule) for rule in rules if rule.strip()]


def path_forms(path: Path, cwd: Path) -> list[str]:
    """The path relative to the working directory (as named and resolved), else absolute."""
    forms: list[str] = []
    roots = {cwd, Path(os.path.realpath(cwd))}
    for candidate in (path, Path(os.path.realpath(path))):
        for root in roots:
            try:
                forms.append(candidate.relative_to(root).as_posix())
            except ValueError:
                continue
        forms.append(candidate.as_posix())
    return list(dict.fromkeys(forms))


def glob_path(pattern: str, shown: str) -> bool:
    if pattern.endswith("/**"):
        base = pattern[:-3]
        return (
            shown == base
            or shown.startswith(base + "/")
            or fnmatch.fnmatchcase(shown, pattern.replace("/**", "/*"))
        )
    return fnmatch.fnmatchcase(shown, pattern) or fnmatch.fnmatchcase(
        shown, pattern.replace("**/", "")
    )
