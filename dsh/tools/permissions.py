"""Permission modes and rules: whether a tool call may run, must be asked, or is denied.

Rules are written ``tool(pattern)`` (or ``tool`` alone, any call):

- ``bash(git status)`` allows exactly that command; ``bash(git status:*)`` that command
  followed by anything. A command is allowed only when every simple command in it is
  (see :mod:`dsh.tools.shell`); redirections to files, loops and the like never match.
- ``edit(src/**)`` covers every file-writing tool (``edit``, ``write``, ``multi_edit``) for
  paths matching the glob, relative to the working directory.
- Any other name matches that tool by name, the pattern against its summary.

Deny rules win over allow rules. The mode decides what is left:

=============  ===========  ==========  ==========  =========  ==========  ===========
mode           read tools   secret      writes in   writes     protected   commands,
                            stores      the cwd     outside    paths       other
=============  ===========  ==========  ==========  =========  ==========  ===========
read-only      allow        ask         deny        deny       deny        ask
default        allow        ask         ask         ask        ask         ask
accept-edits   allow        ask         allow       ask        ask         ask
bypass         allow        allow       allow       allow      allow       allow
=============  ===========  ==========  ==========  =========  ==========  ===========

The paths are those of :mod:`dsh.tools.protected`:

- dsh's keys and trust store (``$DSH_HOME``'s ``credentials.json``, ``.env``,
  ``trust.toml``, ``installation.key``) are denied in every mode, bypass included:
  reading, writing, a redirection into them, or a command naming them.
- *Secret stores* (``~/.ssh``, ``~/.aws``...) are read only when asked, in read-only
  mode too; searches over a wider folder leave their files out.
- *Protected paths* (``.git``, ``.dsh``, ``$DSH_HOME``, shell start-up files,
  ``~/.ssh``, ``~/.gitconfig``...) are written, by a file tool or a redirection, only
  when asked (commands in read-only mode are asked as any command is).

Their asks are never offered "allow for this session", and no allow rule or grant
covers them (nor a command whose words name one): project settings could set the
mode, a hook or ``core.fsmonitor`` runs later without asking.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh.tools.definition import Action, ToolDefinition
from dsh.tools.protected import (
    Protection,
    command_protections,
    read_protection,
    write_protection,
)
from dsh.tools.shell import parse_command

PermissionMode = Literal["read-only", "default", "accept-edits", "bypass"]
MODES: tuple[PermissionMode, ...] = ("read-only", "default", "accept-edits", "bypass")
Verdict = Literal["allow", "ask", "deny"]
FILE_TOOLS = frozenset({"edit", "write", "multi_edit"})

_RULE = re.compile(r"^\s*([A-Za-z][\w-]*)\s*(?:\((.*)\))?\s*$", re.S)


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

    def matches_command(self, command: str) -> bool:
        """Whether this rule's pattern matches one simple command's text."""
        if self.pattern is None or self.pattern == "*":
            return True
        words = command.split()
        if self.pattern.endswith(":*"):
            prefix = self.pattern[:-2].split()
            return words[: len(prefix)] == prefix
        return words == self.pattern.split()

    def matches_path(self, path: Path, cwd: Path) -> bool:
        if self.pattern is None:
            return True
        try:
            # Action paths are real paths, so compare them with the real cwd.
            shown = path.relative_to(cwd.resolve()).as_posix()
        except ValueError:
            shown = path.as_posix()
        pattern = self.pattern
        if pattern.endswith("/**"):
            return shown == pattern[:-3] or shown.startswith(pattern[:-2])
        return fnmatch.fnmatchcase(shown, pattern) or fnmatch.fnmatchcase(
            shown, pattern.replace("**/", "")
        )


def _applies(rule: Rule, tool: ToolDefinition) -> bool:
    if rule.tool == "edit":
        return tool.name in FILE_TOOLS
    return rule.tool == tool.name


def rule_matches(rule: Rule, tool: ToolDefinition, action: Action, cwd: Path) -> bool:
    """Whether ``rule`` covers the whole of ``action``."""
    if not _applies(rule, tool):
        return False
    if action.command is not None:
        parsed = parse_command(action.command)
        return parsed.checkable and all(rule.matches_command(c) for c in parsed.commands)
    if action.paths and rule.tool == "edit":
        return all(rule.matches_path(path, cwd) for path in action.paths)
    return rule.pattern is None or fnmatch.fnmatchcase(action.summary, rule.pattern)


def rules_cover(rules: Iterable[Rule], tool: ToolDefinition, action: Action, cwd: Path) -> bool:
    """Whether every part of ``action`` is allowed by some rule (for commands: each simple
    command by some rule, not necessarily the same one)."""
    relevant = [rule for rule in rules if _applies(rule, tool)]
    if not relevant:
        return False
    if action.command is not None:
        parsed = parse_command(action.command)
        return parsed.checkable and all(
            any(rule.matches_command(command) for rule in relevant) for command in parsed.commands
        )
    return any(rule_matches(rule, tool, action, cwd) for rule in relevant)


def rules_deny(
    rules: Iterable[Rule], tool: ToolDefinition, action: Action, cwd: Path
) -> Rule | None:
    """The first deny rule touching any part of ``action``."""
    for rule in rules:
        if not _applies(rule, tool):
            continue
        if action.command is not None:
            parts = parse_command(action.command).commands or [action.command]
            if any(rule.matches_command(part) for part in parts):
                return rule
        elif rule_matches(rule, tool, action, cwd):
            return rule
    return None


def inside(path: Path, cwd: Path) -> bool:
    resolved, root = path.resolve(), cwd.resolve()
    return resolved == root or root in resolved.parents


@dataclass(frozen=True)
class Assessment:
    verdict: Verdict
    reason: str
    grantable: bool = True
    """Whether "allow for this session" may be offered (not in read-only mode)."""
    by: Literal["mode", "rule"] = "mode"
    """What decided: the mode, or a rule (from settings, or granted this session)."""
    headless: str | None = None
    """For an ask: what tells the model why no one could allow it, headless (the
    usual hint, "allow it with --permission-mode or an allow rule", when None)."""


def protections(action: Action, cwd: Path) -> list[Protection]:
    """The protected paths and secret files ``action`` touches, refusals first."""
    found = [p for path in action.paths if (p := write_protection(path, cwd)) is not None]
    found += [p for path in action.reads if (p := read_protection(path, cwd)) is not None]
    if action.command is not None:
        found += command_protections(action.command, action.workdir or cwd)
    return sorted(found, key=lambda p: not p.refused)


def assess(
    mode: PermissionMode,
    tool: ToolDefinition,
    action: Action,
    cwd: Path,
    *,
    allow: Iterable[Rule] = (),
    deny: Iterable[Rule] = (),
    granted: Iterable[Rule] = (),
) -> Assessment:
    """The verdict for one call, from protected paths, rules, session grants and the mode."""
    found = protections(action, cwd)
    if found and found[0].refused:
        return Assessment("deny", found[0].reason, grantable=False)
    if action.risk == "read" and not found:
        return Assessment("allow", "reads only")
    denied = rules_deny(deny, tool, action, cwd)
    if denied is not None:
        return Assessment("deny", f"denied by the rule {denied}", by="rule")
    writes_outside = [p for p in action.paths if not inside(p, cwd)]
    if mode == "bypass":
        return Assessment("allow", "bypass mode")
    if action.risk == "write" and mode == "read-only":
        return Assessment("deny", "read-only mode allows no writes")
    if found:
        # Whatever the rules or grants say: a protected file runs things later without
        # asking (a hook, core.fsmonitor, the mode in settings), a secret store holds
        # keys. Each is the user's call, every time.
        reason = found[0].reason
        return Assessment(
            "ask",
            reason,
            grantable=False,
            headless=f"{reason}; only --permission-mode bypass allows it unasked",
        )
    if action.risk == "write":
        if writes_outside:
            return Assessment("ask", f"writes outside the working directory: {writes_outside[0]}")
        if mode == "accept-edits":
            return Assessment("allow", "accept-edits mode")
    if rules_cover(allow, tool, action, cwd):
        return Assessment("allow", "an allow rule in settings", by="rule")
    if mode != "read-only" and rules_cover(granted, tool, action, cwd):
        return Assessment("allow", "allowed for this session", by="rule")
    return Assessment("ask", f"{action.risk} needs approval", grantable=mode != "read-only")


def session_rule(tool: ToolDefinition, action: Action) -> Rule:
    """The rule an "allow for this session" answer grants: for a command, its first
    word (or two, for tools like git and npm with subcommands); for a file, the tool."""
    if action.command is not None:
        parsed = parse_command(action.command)
        words = parsed.commands[0].split() if parsed.commands else action.command.split()
        keep = 2 if len(words) > 1 and words[0] in _SUBCOMMAND_TOOLS else 1
        return Rule(tool.name, " ".join(words[:keep]) + ":*")
    if tool.name in FILE_TOOLS:
        return Rule("edit")
    return Rule(tool.name)


_SUBCOMMAND_TOOLS = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "cargo",
        "go",
        "uv",
        "pip",
        "docker",
        "kubectl",
        "make",
        "python",
        "python3",
    }
)
