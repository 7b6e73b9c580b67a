"""Permission modes and rules: whether a tool call may run, must be asked, or is denied.

Rules are written ``tool(pattern)`` (or ``tool`` alone, any call); ``docs/security.md``
has the whole language with examples. Three names are kinds of action, not tools; they
match what a call's :class:`~dsh.policy.action.Action` declares, whichever tool
makes it:

- ``bash(...)`` covers every call that runs a shell command (its action's
  ``command``). ``bash(git status)`` matches exactly that command,
  ``bash(git status:*)`` that command followed by anything. A command is analysed
  (:mod:`dsh.policy.shell`): wrappers are looked through (``timeout 5 rm x`` runs
  ``rm``), an allow rule must cover every command it runs, and a command with anything
  the analysis cannot vouch for (a substitution, a redirection that writes, a loop,
  ``eval``...) is never allowed by a rule.
- ``edit(glob)`` covers every call that writes files (its action's ``paths``), by path
  relative to the working directory.
- ``read(glob)`` covers every call that reads files by path (its action's ``reads``);
  a denied path is also left out of searches and ``@`` mentions.

Any other name matches tools by name (``mcp__github__*`` is a glob), and its pattern
the call's target (the program a call types into) or summary.

Deny rules win over everything, in every mode (bypass included), for every tool that
can do what they forbid. A command the analysis cannot fully see (``eval``, a computed
program name) is asked about when a deny rule could apply to it, even in bypass mode.
The mode decides what is left:

=============  ===========  ==========  ==========  =========  ==========  ===========
mode           read tools   secret      writes in   writes     protected   commands,
                            stores      the cwd     outside    paths       other
=============  ===========  ==========  ==========  =========  ==========  ===========
plan           allow        ask         deny        deny       deny        deny
read-only      allow        ask         deny        deny       deny        ask
default        allow        ask         ask         ask        ask         ask
accept-edits   allow        ask         allow       ask        ask         ask
bypass         allow        allow       allow       allow      allow       allow
=============  ===========  ==========  ==========  =========  ==========  ===========

The paths are those of :mod:`dsh.policy.protected`:

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
import glob
import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh.permission_modes import MODES as MODES
from dsh.permission_modes import PLAN_MODE_REFUSAL, PLANNING_MODES
from dsh.permission_modes import PermissionMode as PermissionMode
from dsh.policy.action import Action, ToolNames
from dsh.policy.git_config import repository_programs
from dsh.policy.globs import (
    UNDER,
    Tokens,
    could_match_any,
    fn_tokens,
    on_disk,
    options_possible,
    suffixes_after,
)
from dsh.policy.grant_policy import grant_words
from dsh.policy.programs import SYSTEM_DIRS, base_name
from dsh.policy.protected import (
    Protection,
    command_protections,
    folder_forms,
    is_path_text,
    named_paths,
    pattern_forms,
    read_protection,
    write_protection,
)
from dsh.policy.read_only_commands import only_reads
from dsh.policy.readers import recursive_reads
from dsh.policy.rules import Kind as Kind
from dsh.policy.rules import Rule as Rule
from dsh.policy.rules import RuleError as RuleError
from dsh.policy.rules import glob_path
from dsh.policy.rules import parse_rules as parse_rules
from dsh.policy.shell import Analysis, Invocation, analyse
from dsh.policy.shell_words import Word

Verdict = Literal["allow", "ask", "deny"]
# ----------------------------------------------------------------- commands


def _program_matches(pattern: str, word: Word, *, resolve: bool) -> bool:
    """A program word against a rule's word: a path matches by its base name when
    ``resolve`` (deny rules), else only when it is a system program's path."""
    value = word.value
    if value is None:
        return False
    if "/" in pattern or "/" not in value:
        return value == pattern
    return base_name(value) == pattern and (resolve or value.startswith(SYSTEM_DIRS))


def _allowed_by(rule: Rule, invocation: Invocation) -> bool:
    if rule.any:
        return True
    words, prefix = rule.command_words()
    if not words or (invocation.open_ended and not prefix):
        return False
    layers = invocation.layers
    real = layers[-1].argv
    for index, layer in enumerate(layers):
        argv = layer.argv
        # Where the real program starts in this layer: the rule must reach it, so
        # `bash(timeout:*)` never allows what timeout runs.
        start = 0 if layer.wrapper == "git" or index == len(layers) - 1 else len(argv) - len(real)
        if len(words) > start and _words_match(words, prefix, argv, start, resolve=False):
            return True
        if layer.privileged:
            return False  # sudo, env X=1: the rule must name the wrapper
    return False


def _words_match(
    words: Sequence[str], prefix: bool, argv: Sequence[Word], start: int, *, resolve: bool
) -> bool:
    if len(argv) < len(words) or (not prefix and len(argv) != len(words)):
        return False
    for index, (pattern, word) in enumerate(zip(words, argv, strict=False)):
        if index in (0, start):
            if not _program_matches(pattern, word, resolve=resolve):
                return False
        elif word.value is None or word.value != pattern:
            return False  # a pattern (*.py) matches only the same pattern
    return True


DenyMatch = Literal["yes", "maybe"] | None


def _denied_by(rule: Rule, invocation: Invocation) -> DenyMatch:
    if rule.any:
        return "yes"
    words, prefix = rule.command_words()
    if not words:
        return None
    found: DenyMatch = None
    for layer in invocation.layers:
        result = _deny_layer(words, prefix, layer.argv)
        if result == "yes":
            return "yes"
        found = found or result
    return found


def _deny_layer(words: Sequence[str], prefix: bool, argv: Sequence[Word]) -> DenyMatch:
    result: DenyMatch = "yes"
    for index, pattern in enumerate(words):
        if index >= len(argv):
            return None
        word = argv[index]
        if word.value is None or word.glob:
            # Computed, or a pattern bash may expand to the rule's word.
            if word.value is not None and not fnmatch.fnmatchcase(
                pattern, base_name(word.value) if index == 0 else word.value
            ):
                return None
            result = "maybe"
            continue
        if index == 0:
            if not _program_matches(pattern, word, resolve=True):
                return None
        elif word.value != pattern:
            return None
    if result == "yes" and not prefix and len(argv) != len(words):
        return None
    return result


def commands_covered(rules: Iterable[Rule], analysis: Analysis) -> bool:
    """Whether every command the analysis found is allowed by some rule, and the
    analysis vouches for all of it."""
    relevant = list(rules)
    if not analysis.checkable or not relevant:
        return False
    return all(
        any(_allowed_by(rule, invocation) for rule in relevant)
        for invocation in analysis.invocations
        if not invocation.transparent
    )


def rules_cover(rules: Iterable[Rule], tool: ToolNames, action: Action, cwd: Path) -> bool:
    """Whether every part of ``action`` is allowed by some rule (for commands: each
    command it runs by some rule, not necessarily the same one)."""
    relevant = [rule for rule in rules if rule.applies(tool, action)]
    if not relevant or action.unchecked is not None:
        return False
    if action.command is not None:
        commands = [rule for rule in relevant if _about_commands(rule)]
        # git_elsewhere reads the repository's config: only for a command a rule covers.
        return (
            commands_covered(commands, analyse(action.command))
            and git_elsewhere(action, cwd) is None
        )
    return any(_covers_call(rule, tool, action, cwd) for rule in relevant)


def _about_commands(rule: Rule) -> bool:
    """Whether a rule is read as a command pattern for a call that runs one:
    ``bash(...)``, or a rule naming a tool that runs commands (``NAME(git status:*)``;
    the tool's name alone is any command, as ``bash`` alone is, so neither vouches for
    a command the analysis cannot)."""
    return rule.kind in ("bash", "tool")


def _covers_call(rule: Rule, tool: ToolNames, action: Action, cwd: Path) -> bool:
    """A rule that is not about commands, against a whole call."""
    match rule.kind:
        case "bash":
            return False
        case "edit":
            return all(rule.matches_path(path, cwd) for path in action.paths)
        case "read":
            reads = action.reads
            return bool(reads) and all(rule.matches_path(path, cwd) for path in reads)
    if rule.pattern is None:
        return True
    return fnmatch.fnmatchcase(action.target or action.summary, rule.pattern)


@dataclass(frozen=True)
class Denial:
    rule: Rule
    certain: bool
    """False: the call might do what the rule forbids (the analysis cannot see all)."""
    why: str = ""


def rules_deny(rules: Iterable[Rule], tool: ToolNames, action: Action, cwd: Path) -> Denial | None:
    """The first deny rule that forbids ``action``, or else one that might."""
    maybe: Denial | None = None
    named: list[Path] | None = None  # looked up once, for the first path rule
    for rule in rules:
        if action.command is not None and rule.kind in ("read", "edit") and rule.pattern:
            # A command naming a denied file (cat secrets/x, cp x secrets/) is denied too.
            if named is None:
                named = named_paths(action.command, action.workdir or cwd)
            if any(rule.matches_path(path, cwd) for path in named):
                return Denial(rule, True)
            around = _read_around(rule, action.command, action.workdir or cwd, cwd)
            if around is not None and around.certain:
                return around
            maybe = maybe or around
        if not rule.applies(tool, action):
            continue
        if action.command is not None and _about_commands(rule):
            analysis = analyse(action.command)
            programs = analysis.programs
            words = rule.command_words()[0]
            if rule.any or programs is None or not words or base_name(words[0]) in programs:
                results = [_denied_by(rule, inv) for inv in analysis.invocations]
            else:
                results = []  # the rule's program runs nowhere in it
            if "yes" in results:
                return Denial(rule, True)
            hidden = analysis.hidden or ([action.unchecked] if action.unchecked else [])
            if maybe is None and ("maybe" in results or hidden):
                why = hidden[0] if hidden else "a word is computed at run time"
                maybe = Denial(rule, False, why)
            continue
        if rule.kind in ("read", "edit"):
            paths = action.reads if rule.kind == "read" else action.paths
            if rule.pattern is None or any(rule.matches_path(p, cwd) for p in paths):
                return Denial(rule, True)
            continue
        if rule.pattern is None or fnmatch.fnmatchcase(
            action.target or action.summary, rule.pattern
        ):
            return Denial(rule, True)
    return maybe


def _rule_patterns(pattern: str) -> tuple[Tokens, ...]:
    """A path rule's pattern as the fnmatch patterns :func:`glob_path` tries."""
    if pattern.endswith("/**"):
        texts = [pattern[:-3], pattern[:-3] + "/*", pattern.replace("/**", "/*")]
    else:
        texts = [pattern, pattern.replace("**/", "")]
    return tuple(fn_tokens(text) for text in dict.fromkeys(texts))


def _could_cover(rule: Rule, tokens: Tokens, cwd: Path, *, options: bool) -> bool:
    """Whether a path the bash pattern ``tokens`` (absolute) names could be one the
    rule covers, in any of the forms :func:`path_forms` gives it."""
    patterns = _rule_patterns(rule.pattern or "*")
    forms = [tokens]
    for root in dict.fromkeys((os.fspath(cwd), os.path.realpath(cwd))):
        forms += suffixes_after(tokens, root.rstrip("/"))
    return any(could_match_any(form, patterns, options=options) for form in forms)


def _read_around(rule: Rule, command: str, workdir: Path, cwd: Path) -> Denial | None:
    """A path rule against what a command's patterns could name (``cat .en?``), and,
    for ``read(...)``, against the folders it reads whole (``grep -r x .``): denied as
    the plain spelling is, whether or not the covered file exists yet."""
    analysis = analyse(command)
    options = options_possible(command)
    for word in dict.fromkeys(analysis.patterns):
        if not is_path_text(word):
            continue
        said = word.replace("\\", "")
        for tokens in pattern_forms(word, workdir):
            if _could_cover(rule, tokens, cwd, options=options):
                return Denial(rule, True, f"the pattern {said} could name a file it covers")
            # What it matches now, links followed (lin? naming a link to the folder).
            matches = on_disk(tokens, hidden=options)
            if matches is None or any(rule.matches_path(m, cwd) for m in matches):
                return Denial(rule, True, f"the pattern {said} names a file it covers")
    if rule.kind != "read":
        return None
    for read in recursive_reads(analysis):
        if not is_path_text(read.folder):
            continue
        for tokens in folder_forms(read.folder, workdir):
            if _could_cover(rule, tokens + UNDER, cwd, options=options):
                folder = read.folder.replace("\\", "")
                why = (
                    f"{read.program} reads all of {folder}, which may hold files it covers "
                    "(the grep tool searches a folder and leaves them out)"
                )
                return Denial(rule, True, why)
    return None


def read_denied(rules: Iterable[Rule], path: Path, cwd: Path) -> Rule | None:
    """The deny rule that hides ``path`` from every reading tool, if any."""
    for rule in rules:
        if rule.kind == "read" and rule.matches_path(path, cwd):
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
    tool: ToolNames,
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
    denied = rules_deny(deny, tool, action, cwd)
    if denied is not None and denied.certain:
        said = f": {denied.why}" if denied.why else ""
        return Assessment("deny", f"denied by the rule {denied.rule}{said}", by="rule")
    if denied is not None:
        reason = f"the deny rule {denied.rule} cannot be checked: {denied.why}"
        return Assessment(
            "ask",
            reason,
            grantable=False,
            headless=f"{reason}; write the command so that what it runs is plain",
        )
    if action.risk == "read" and not found:
        return Assessment("allow", "reads only")
    if mode == "plan" and action.risk != "read":
        if not (
            action.command is not None
            and not action.paths
            and not action.typed
            and only_reads(action.command)
            and git_elsewhere(action, cwd) is None
        ):
            return Assessment("deny", PLAN_MODE_REFUSAL, grantable=False)
        if not found:
            return Assessment("allow", "plan mode: a command that only reads")
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
        if writes_outside and not (
            mode not in PLANNING_MODES
            and all(outside_granted(granted, path) for path in writes_outside)
        ):
            return Assessment("ask", f"writes outside the working directory: {writes_outside[0]}")
        if mode == "accept-edits":
            return Assessment("allow", "accept-edits mode")
    if rules_cover(allow, tool, action, cwd):
        return Assessment("allow", "an allow rule in settings", by="rule")
    if mode not in PLANNING_MODES and rules_cover(granted, tool, action, cwd):
        return Assessment("allow", "allowed for this session", by="rule")
    unchecked = _unchecked(action, cwd)
    if unchecked is not None:
        return Assessment(
            "ask",
            f"no rule can allow it: {unchecked}",
            grantable=False,
            headless=f"no rule can allow it unasked: {unchecked}",
        )
    return Assessment("ask", f"{action.risk} needs approval", grantable=mode not in PLANNING_MODES)


def _unchecked(action: Action, cwd: Path) -> str | None:
    if action.unchecked is not None:
        return action.unchecked
    if action.command is not None:
        analysis = analyse(action.command)
        if analysis.unchecked:
            return analysis.unchecked[0]
        return git_elsewhere(action, cwd)
    return None


def git_elsewhere(action: Action, cwd: Path) -> str | None:
    """Why the git a command runs may obey programs no rule saw, or None: it runs
    outside the project, or in a repository whose own config names programs under
    names of its choosing (a filter or diff driver, an alias, an include), which no
    setting of :mod:`dsh.policy.git_config` can override by name."""
    if action.command is None:
        return None
    analysis = analyse(action.command)
    programs = analysis.programs
    if programs is not None and "git" not in programs:
        return None
    where = action.workdir or cwd
    folders = _folders_entered(analysis, where)
    if isinstance(folders, str):
        return folders
    for folder in (where, *folders):
        if not inside(folder, cwd):
            return f"git runs outside the project, in {folder}"
        found = repository_programs(folder)
        if found is not None:
            return found
    return None


def _folders_entered(analysis: Analysis, where: Path) -> list[Path] | str:
    """The folders a command's ``cd``/``pushd`` go to (each from ``where`` and from
    the one before), or why they cannot be told."""
    folders: list[Path] = []
    current = where
    for invocation in analysis.invocations:
        argv = invocation.argv
        if not argv or argv[0].value not in ("cd", "pushd"):
            continue
        words = [word.value for word in argv[1:]]
        if any(word is None for word in words):
            return "git after a cd to a folder computed at run time"
        targets = [w for w in words if w is not None and (w == "-" or not w.startswith("-"))]
        target = targets[0] if targets else "~"
        if target == "-" or target.startswith("+") or (argv[0].value == "pushd" and not targets):
            return "git after a cd to a folder from the directory stack"
        path = Path(target).expanduser()
        current = Path(os.path.realpath(current / path))
        folders += [current, Path(os.path.realpath(where / path))]
    return folders


# ----------------------------------------------------------------- session grants


def session_rules(tool: ToolNames, action: Action, cwd: Path | None = None) -> list[Rule] | None:
    """The rules an "allow for this session" answer grants, or None when none can be
    offered. For a command, one per command it runs: the exact command, or the smallest
    safe prefix (see :func:`dsh.policy.grant_policy.grant_words`); for file writes, ``edit``
    (writes inside ``cwd``) and, for a path outside it, :func:`outside_grant`;
    otherwise the tool (for its target, when the call names one)."""
    if action.command is not None:
        if action.unchecked is not None:
            return None
        analysis = analyse(action.command)
        if not analysis.checkable:
            return None
        rules: list[Rule] = []
        for invocation in analysis.invocations:
            if invocation.transparent:
                continue
            offered = grant_words(invocation.layers)
            if offered is None:
                return None
            words, prefix = offered
            if invocation.nested:  # what find -exec runs: that command, exactly
                words = [w.value or "" for w in invocation.layers[0].argv]
                prefix = False
            pattern = " ".join(shlex.quote(w) for w in words) + (":*" if prefix else "")
            rule = Rule(tool.name, pattern)
            if rule not in rules:
                rules.append(rule)
        return rules or None
    if action.paths:
        if cwd is None:
            return [Rule("edit")]
        writes: list[Rule] = []
        for path in action.paths:
            rule = Rule("edit") if inside(path, cwd) else outside_grant(path, cwd)
            if rule not in writes:
                writes.append(rule)
        return writes
    if action.target is not None:
        return [Rule(tool.name, action.target)]
    return [Rule(tool.name)]


def outside_grant(path: Path, cwd: Path) -> Rule:
    """What "allow for this session" grants for a write outside the working directory:
    the file's folder and what is under it (``edit(/srv/out/**)``), or only that file
    where its folder is too wide to hand over (the root, a top-level folder such as
    ``/tmp``, the home folder, or a folder holding the project). Written as the
    resolved path, which is the only form :func:`outside_granted` matches."""
    real = Path(os.path.realpath(path))
    folder = real.parent
    holds = [Path(os.path.realpath(cwd)), Path(os.path.realpath(os.path.expanduser("~")))]
    too_wide = len(folder.parts) <= 2 or any(
        folder == held or folder in held.parents for held in holds
    )
    if too_wide:
        return Rule("edit", glob.escape(real.as_posix()))
    return Rule("edit", glob.escape(folder.as_posix()) + "/**")


def outside_granted(rules: Iterable[Rule], path: Path) -> bool:
    """Whether a rule names ``path``, outside the working directory, for writes: an
    ``edit`` rule with an absolute pattern matching the path as resolved (a bare
    ``edit``, or a relative pattern, is about the working directory; and a link in a
    granted folder pointing elsewhere is matched where it points)."""
    real = Path(os.path.realpath(path)).as_posix()
    return any(
        rule.kind == "edit"
        and rule.pattern is not None
        and rule.pattern.startswith("/")
        and glob_path(rule.pattern, real)
        for rule in rules
    )


def describe_grant(rules: Sequence[Rule], *, commands: bool) -> str:
    """What a grant will allow, in words, for the dialog (``commands``: the rules were
    offered for a call that runs a command)."""
    parts = []
    for rule in rules:
        if rule.tool == SANDBOX_GRANT and rule.pattern:
            parts.append(_describe_escalation(rule.pattern))
        elif commands and rule.pattern and not rule.any:
            words, prefix = rule.command_words()
            command = " ".join(shlex.quote(w) for w in words)
            parts.append(f"`{command}` and `{command} …`" if prefix else f"exactly `{command}`")
        elif rule.kind == "edit" and rule.pattern is None:
            parts.append("edits to files inside the working directory")
        elif rule.kind == "edit" and rule.pattern is not None and rule.pattern.endswith("/**"):
            parts.append(f"edits to files in {rule.pattern[:-3]}/ and its subfolders")
        elif rule.kind == "edit":
            parts.append(f"edits to {rule.pattern}")
        elif rule.pattern is not None:
            parts.append(f"{rule.tool} calls for {rule.pattern}")
        else:
            parts.append(f"every {rule.tool} call")
    return "; ".join(parts)


SANDBOX_GRANT = "sandbox"
"""The name an escalation's session grant is written under (:mod:`dsh.policy.escalation`):
``sandbox(curl network)``. No allow rule in settings is read under it."""


def _describe_escalation(pattern: str) -> str:
    try:
        words = shlex.split(pattern)
    except ValueError:
        return f"sandbox({pattern})"
    if len(words) < 2:
        return f"sandbox({pattern})"
    program, what = f"`{words[0]}`", words[1:]
    if what == ["unsandboxed"]:
        return f"{program} outside the sandbox"
    if what == ["network"]:
        return f"{program} with the network"
    if len(what) == 2 and what[0] == "write":
        return f"{program} writing {what[1]} and what is under it"
    return f"sandbox({pattern})"
