"""Claude Code's settings files, read as dsh's: a setup made for Claude Code applies
unchanged (docs/hooks.md, "Claude Code compatibility").

Which files, when ``[claude_code] read`` is true (the default; the user's own layers
alone decide it):

- the user's ``settings.json`` in ``$CLAUDE_CONFIG_DIR`` (Claude Code's own variable),
  else ``~/.claude/``: one of the user's own layers, beneath ``$DSH_HOME/settings.toml``;
- a project's ``.claude/settings.json``, then ``.claude/settings.local.json``, in the
  nearest folder from the working directory up to the project root that has them:
  project layers beneath ``.dsh/settings.toml``, applied whole only in a trusted
  folder and otherwise narrowed as ``.dsh/settings.toml`` is (:mod:`dsh.narrowing`).

Of a file, three keys are read and put in dsh's words (:func:`read_claude_file`):

- ``hooks``: already the shape of dsh's ``[hooks]`` table; a handler without a
  ``timeout`` gets Claude Code's default, 600 s, rather than dsh's 60;
- ``permissions.allow`` and ``permissions.deny``: each rule translated into dsh's
  rule language (:func:`translate_rule`). A rule dsh cannot say is reported and left
  out; a deny rule dsh cannot say exactly is applied wider rather than left out, so
  a translation never allows what the file denied;
- ``permissions.ask``: dsh has no ask rules; reported, not applied.

Everything else in the file (``model``, ``env``, ``sandbox``...) is Claude Code's own
and left alone. A file that cannot be used (not JSON, writable by others) is skipped
with a line saying why: it is not dsh's, and dsh starts without it.

The tools Claude Code names in rules (``WebFetch``, ``Agent``) are matched by what
each tool declares it is called there (:class:`dsh.tools.definition.ClaudeCodeName`);
the core names none of them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh.paths import unsafe_to_obey
from dsh.regular_files import read_regular_file
from dsh.settings_files import Document

CLAUDE_DIR = ".claude"
SETTINGS_FILE = "settings.json"
PROJECT_FILES = ("settings.json", "settings.local.json")
"""A project's files, lowest first: the local one (not committed) wins."""
CONFIG_DIR_VARIABLE = "CLAUDE_CONFIG_DIR"
HOOK_TIMEOUT_S = 600
"""Claude Code's default for a command hook without a ``timeout``."""

_RULE = re.compile(r"^\s*([A-Za-z_][\w*-]*)\s*(?:\((.*)\))?\s*$", re.S)
_PATH_TOOLS = {
    "Read": "read",
    "Edit": "edit",
    "Write": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
}
"""Claude Code's file tools and the kind of dsh rule that covers what they do."""


def user_folder(environ: Mapping[str, str], home: Path | None = None) -> Path:
    """The user's Claude Code folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    configured = environ.get(CONFIG_DIR_VARIABLE, "").strip()
    if configured:
        return Path(configured).expanduser()
    return (home or Path.home()) / CLAUDE_DIR


def project_folder(cwd: Path, root: Path, user: Path, home: Path | None = None) -> Path | None:
    """The nearest folder from ``cwd`` up to the project ``root`` holding a
    ``.claude/settings.json`` or ``.claude/settings.local.json``, never above the home
    folder, and never the user's own Claude Code folder (dsh run in ``~``)."""
    here = cwd.resolve()
    top = root.resolve()
    stop = (home or Path.home()).resolve()
    for folder in (here, *here.parents):
        claude = folder / CLAUDE_DIR
        if any((claude / name).is_file() for name in PROJECT_FILES):
            return None if claude.resolve() == user.resolve() else folder
        if folder in (top, stop):
            break
    return None


@dataclass(frozen=True)
class ClaudeFile:
    """One Claude Code settings file, in dsh's words."""

    document: Document
    """What dsh takes of it, as a settings document (``hooks``, ``permissions``)."""
    notes: tuple[str, ...]
    """What of it dsh does not apply, and why: a line each."""
    hooks: int = 0
    rules: int = 0

    @property
    def summary(self) -> str:
        """Which file was read and what was taken of it, for the start-up notice."""
        taken = [
            f"{self.hooks} hook{'s' if self.hooks != 1 else ''}",
            f"{self.rules} permission rule{'s' if self.rules != 1 else ''}",
        ]
        return f"read Claude Code settings {self.document.path}: {', '.join(taken)}"


def read_claude_file(path: Path, *, base: Path, home: Path) -> ClaudeFile | None:
    """The file at ``path`` in dsh's words, or None when there is none. ``base`` is
    the folder a rule's ``/path`` is relative to (the one holding ``.claude``),
    ``home`` the one ``~/path`` is."""
    if not path.is_file():
        return None
    empty = Document(path, {})
    problem = unsafe_to_obey(path)
    if problem is not None:
        return ClaudeFile(empty, (f"ignored {path}: {problem}; only you may write it",))
    try:
        values = json.loads(read_regular_file(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return ClaudeFile(empty, (f"ignored {path}: not valid JSON ({error})",))
    if not isinstance(values, dict):
        return ClaudeFile(empty, (f"ignored {path}: not a JSON object",))
    notes: list[str] = []
    taken: dict[str, Any] = {}
    hooks = values.get("hooks")
    count = 0
    if isinstance(hooks, dict) and hooks:
        taken["hooks"] = {event: _with_timeouts(groups) for event, groups in hooks.items()}
        count = sum(_handlers(groups) for groups in hooks.values())
    elif hooks is not None and not isinstance(hooks, dict):
        notes.append(f"ignored {path}: hooks must be an object of events")
    permissions = values.get("permissions")
    rules = 0
    if isinstance(permissions, dict):
        table: dict[str, list[str]] = {}
        for kind in ("allow", "deny"):
            listed = permissions.get(kind)
            if listed is None:
                continue
            if not isinstance(listed, list):
                notes.append(f"ignored {path}: permissions.{kind} must be a list of rules")
                continue
            for text in listed:
                if not isinstance(text, str):
                    notes.append(f"ignored {path}: permissions.{kind} {text!r} is not a rule")
                    continue
                rule, note = translate_rule(text, deny=kind == "deny", base=base, home=home)
                if note:
                    notes.append(f"{path}: permissions.{kind} {json.dumps(text)} {note}")
                if rule is not None and rule not in table.setdefault(kind, []):
                    table[kind].append(rule)
                    rules += 1
        asked = permissions.get("ask")
        if isinstance(asked, list) and asked:
            shown = ", ".join(json.dumps(str(rule)) for rule in asked)
            notes.append(
                f"{path}: permissions.ask {shown} not applied: dsh has no ask rules "
                "(what no rule allows is asked in the default mode)"
            )
        if table:
            taken["permissions"] = table
    return ClaudeFile(Document(path, taken), tuple(notes), hooks=count, rules=rules)


def _with_timeouts(groups: Any) -> Any:
    """The event's matcher groups with Claude Code's default timeout on each handler
    that sets none (anything malformed is passed on for the hooks' own checks)."""
    if not isinstance(groups, list):
        return groups
    out: list[Any] = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            handlers = [
                {"timeout": HOOK_TIMEOUT_S, **handler} if isinstance(handler, dict) else handler
                for handler in group["hooks"]
            ]
            group = {**group, "hooks": handlers}
        out.append(group)
    return out


def _handlers(groups: Any) -> int:
    if not isinstance(groups, list):
        return 0
    return sum(
        len(group["hooks"])
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
    )


def translate_rule(text: str, *, deny: bool, base: Path, home: Path) -> tuple[str | None, str]:
    """A Claude Code permission rule as a dsh rule, and a note when it is not the same
    rule: ``(None, why)`` for one left out, ``(wider, why)`` for a deny rule applied to
    more than it names. ``Bash(npm run test:*)`` is ``bash(npm run test:*)``,
    ``Read(./.env)`` is ``read(.env)``, ``Edit(src/**)`` is ``edit(src/**)``,
    ``WebFetch(domain:example.com)`` is ``WebFetch(example.com)`` (the host a fetch
    declares), ``mcp__github`` is ``mcp__github__*``."""
    match = _RULE.match(text)
    if not match:
        return None, "cannot be read as a rule: not applied"
    tool, spec = match.group(1), match.group(2)
    spec = spec.strip() if spec is not None else None
    whole = spec is None or spec in ("", "*")
    if tool == "Bash":
        return ("bash", "") if whole else _command_rule(spec or "", deny=deny)
    if tool in _PATH_TOOLS:
        kind = _PATH_TOOLS[tool]
        return (kind, "") if whole else (f"{kind}({_path(spec or '', base, home)})", "")
    if tool.startswith("mcp__"):
        if whole:
            return (tool if "__" in tool[5:] else f"{tool}__*"), ""
        return _not_said(tool, deny)
    if whole:
        return tool, ""  # the tool that declares this Claude Code name
    if tool == "WebFetch" and spec is not None and spec.startswith("domain:"):
        return f"WebFetch({spec[len('domain:') :].strip()})", ""
    return _not_said(tool, deny)


def _not_said(tool: str, deny: bool) -> tuple[str | None, str]:
    if deny:
        return tool, f"applied as {tool}: every call of it (dsh cannot say this narrower)"
    return None, "not applied: dsh has no rule that says this"


def _command_rule(spec: str, *, deny: bool) -> tuple[str | None, str]:
    """``Bash(...)``: an exact command, or a prefix (``npm run:*``, ``npm run *``). A
    ``*`` anywhere else is beyond dsh's rules: left out of the allow rules, and a deny
    rule applied to the words before it."""
    if spec.endswith(":*") and "*" not in spec[:-2]:
        return f"bash({spec})", ""
    if spec.endswith(" *") and "*" not in spec[:-2]:
        return f"bash({spec[:-2].rstrip()}:*)", ""
    if "*" not in spec:
        return f"bash({spec})", ""
    if not deny:
        return None, "not applied: dsh's command rules take a * only at the end"
    words = spec.split()
    before = []
    for word in words:
        if "*" in word:
            break
        before.append(word)
    if not before:
        return "bash", "applied as bash: every command (dsh cannot say this narrower)"
    wider = f"bash({' '.join(before)}:*)"
    return wider, f"applied as {wider}, which denies more (a * inside a command)"


def _path(spec: str, base: Path, home: Path) -> str:
    """A Claude Code path pattern as a dsh one: ``//abs`` is ``/abs``, ``~/x`` under the
    home folder, ``/x`` under the folder the settings file is for, ``./x`` under the
    working directory, and a bare name (``.env``, ``*.key``) anywhere below it, as a
    gitignore pattern without a ``/`` is."""
    if spec.startswith("//"):
        return spec[1:]
    if spec.startswith("~/"):
        return str(home / spec[2:])
    if spec.startswith("/"):
        return str(base / spec[1:])
    if spec.startswith("./"):
        return spec[2:]
    if "/" not in spec.rstrip("/"):
        return f"**/{spec}"
    return spec


def claude_reading(own: Mapping[str, Any]) -> bool:
    """Whether the user's own layers leave ``[claude_code] read`` on (the default)."""
    table = own.get("claude_code")
    value = table.get("read", True) if isinstance(table, Mapping) else True
    return value is not False


def home_folder(environ: Mapping[str, str]) -> Path:
    """The user's home folder, as ``~`` in a rule means it."""
    return Path(environ.get("HOME") or os.path.expanduser("~"))
