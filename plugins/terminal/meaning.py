"""Whether a line typed into a shell terminal runs what it reads.

An interactive shell keeps state between lines that a one-off ``bash -c`` does not:
its history (``!!:2`` is a word of the line before), aliases and functions defined
earlier, variables such as ``PATH`` and ``PROMPT_COMMAND``, options, traps and key
bindings. A line is judged as the command it reads (:mod:`dsh.tools.shell`), so any
of these can make an allowed line run something else. Terminals start their shell
with history expansion off (``+H``), and this module says when a line cannot be read
as written, so that no allow rule or grant covers it:

- :func:`unreadable`: the line itself uses or changes what lines mean (a history
  designator, ``fc``, ``history``, ``alias``, a function definition, ``bind``,
  ``set -o``, ``shopt``, ``trap``, ``source``, an assignment to ``PATH``...);
- :class:`Meaning`, kept per terminal: names defined there (an alias or function
  named ``ls`` makes every later ``ls`` unreadable), and, once a line changed the
  shell in ways not followed here (``source``, ``bind``, ``PATH=...``), every later
  line is unreadable: what that terminal's lines mean is no longer known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dsh.tools.shell import analyse

# Builtins whose use changes how later lines are read or what they run, in ways this
# module does not follow: after one, the terminal's lines are not known.
CHANGES_SHELL = {
    "source": "reads a file of commands into the shell",
    ".": "reads a file of commands into the shell",
    "eval": "runs text as commands in the shell",
    "bind": "binds keys to commands",
    "enable": "loads or turns off builtins",
    "shopt": "changes how the shell reads lines",
    "set": "changes how the shell reads lines",
    "trap": "sets commands the shell runs on its own",
    "hash": "sets which file a name runs",
    "exec": "replaces or rewires the shell",
    "history": "changes the shell's history",
    "fc": "runs lines from the shell's history",
    "alias": "defines aliases",
}
# Builtins that set variables named by their arguments.
SETTERS = {
    "declare",
    "typeset",
    "export",
    "readonly",
    "local",
    "read",
    "mapfile",
    "readarray",
    "printf",
    "getopts",
    "let",
}

# Variables whose value changes what later lines run or how they are read.
_VARIABLES = (
    "PATH|IFS|PROMPT_COMMAND|PS0|PS1|PS2|PS3|PS4|ENV|INPUTRC|HISTFILE|CDPATH|"
    "GLOBIGNORE|SHELLOPTS|BASHOPTS|HOME|EDITOR|VISUAL|FCEDIT|EXECIGNORE|"
    "(?:BASH|LD|GIT|PYTHON|NODE|PERL|RUBY)[A-Z0-9_]*"
)
_NOT_A_NAME_BEFORE = r"(?<![\w$#{!@%/.:-])"
_ASSIGNS = re.compile(
    rf"{_NOT_A_NAME_BEFORE}(?:{_VARIABLES})(?:\[[^\]]*\])?\+?="
    rf"|\$\{{(?:{_VARIABLES}):?="
)
_NAMES = re.compile(rf"{_NOT_A_NAME_BEFORE}(?:{_VARIABLES})(?![\w])")
_FUNCTION = re.compile(
    r"(?:^|[\s;&|(){}])function\s+([^\s;&|()<>{}]+)"
    r"|(?:^|[\s;&|(){}])([^\s;&|()<>{}=$'\"`\\]+)\s*\(\s*\)"
)


def history_designator(line: str) -> bool:
    """Whether bash with history expansion on would expand something in ``line``: a
    ``!`` not in single quotes nor after a backslash, and not followed by a blank,
    ``=`` or ``(`` (which bash leaves alone). Inside double quotes ``!`` still
    expands, so only single quotes are taken as quoting. A line starting with ``^``
    is a quick substitution (``^old^new``) of the line before."""
    if line.lstrip(" \t").startswith("^"):
        return True
    single = double = escaped = False
    for index, char in enumerate(line):
        if escaped:
            escaped = False
            continue
        if single:
            single = char != "'"
            continue
        if char == "\\":
            escaped = True
        elif char == "'" and not double:
            single = True
        elif char == '"':
            double = not double
        elif char == "!":
            following = line[index + 1 : index + 2]
            if following and following not in " \t\n=(" and not (double and following == '"'):
                return True
    return False


def _programs(line: str) -> list[tuple[str, tuple[str | None, ...]]]:
    """Each program the line runs, as written and through each wrapper, with its
    arguments (None: computed)."""
    found = []
    for invocation in analyse(line).invocations:
        for layer in invocation.layers:
            if layer.argv and layer.argv[0].value is not None:
                found.append((layer.argv[0].value, tuple(w.value for w in layer.argv[1:])))
    return found


def _lists_only(program: str, arguments: tuple[str | None, ...]) -> bool:
    """Whether ``program`` with ``arguments`` only shows what is set."""
    if not arguments:
        return program not in ("source", ".", "eval", "exec", "fc", "enable")
    if program == "history":
        return all(a is not None and a.isdigit() for a in arguments)
    if program == "bind":
        return all(a in ("-p", "-P", "-v", "-V", "-l", "-s", "-S", "-X") for a in arguments)
    if program == "shopt":
        return not {"-s", "-u"} & set(arguments)
    if program == "alias":
        return all(a is not None and "=" not in a and a != "--" for a in arguments)
    return program in ("set", "trap", "hash") and all(a == "-p" for a in arguments)


def _changes(program: str, arguments: tuple[str | None, ...]) -> str | None:
    """Why running ``program`` with ``arguments`` in the shell may change what later
    lines mean, or None."""
    why = CHANGES_SHELL.get(program)
    if why is not None:
        return None if _lists_only(program, arguments) else f"`{program}` {why}"
    if program in SETTERS and None in arguments:
        return f"`{program}` sets a variable whose name is computed"
    return None


def _sets_variable(line: str) -> str | None:
    """The variable that changes what runs (``PATH``, ``PROMPT_COMMAND``...) that
    ``line`` sets, if it sets one."""
    found = _ASSIGNS.search(line)
    if found is None and (named := _NAMES.search(line)) is not None:
        setters = any(program in SETTERS for program, _ in _programs(line))
        found = named if setters or "((" in line else None
    if found is None:
        return None
    return re.sub(r"[^\w].*", "", found.group(0).lstrip("${"))


def unreadable(line: str) -> str | None:
    """Why ``line``, typed into an interactive shell, may not run what it reads (or
    changes what later lines mean), or None when it reads as written."""
    if history_designator(line):
        return "a history designator (`!`, `^`): the shell would put in words of earlier lines"
    for program, arguments in _programs(line):
        why = _changes(program, arguments)
        if why is not None:
            return why
    if _FUNCTION.search(line):
        return "defines a function: later lines calling it run what it holds"
    variable = _sets_variable(line)
    if variable is not None:
        return f"sets {variable}, which changes what later lines run"
    return None


@dataclass
class Meaning:
    """What one shell terminal's earlier lines did to the meaning of later ones."""

    defined: set[str] = field(default_factory=set)
    """Names of aliases and functions defined in this terminal."""
    changed: str | None = None
    """The first line that changed the shell in ways not followed (then every later
    line is unreadable), and how."""

    def judge(self, command: str) -> str | None:
        """Why ``command`` (the lines Enter completes) cannot be read as written in this
        terminal, or None."""
        if self.changed is not None:
            return f"an earlier line in this terminal {self.changed}; its lines may not run what they read"
        for line in command.split("\n"):
            why = unreadable(line)
            if why is not None:
                return why
            for program, _ in _programs(line):
                if program in self.defined:
                    return f"`{program}` was defined in this terminal (an alias or a function)"
        return None

    def ran(self, command: str) -> None:
        """Note what ``command``, now sent to the shell, defines or changes."""
        for line in command.split("\n"):
            if self.changed is not None:
                return
            names = _defined_names(line)
            if names is None:
                self.changed = f"ran `{line[:60]}`, which defines names dsh cannot read"
                return
            self.defined |= names
            for program, arguments in _programs(line):
                why = None if program == "alias" else _changes(program, arguments)
                if why is not None:
                    self.changed = f"ran `{line[:60]}`: {why}"
                    return
            variable = _sets_variable(line)
            if variable is not None:
                self.changed = f"ran `{line[:60]}`, which sets {variable}"
                return


def _defined_names(line: str) -> set[str] | None:
    """The alias and function names ``line`` defines (None: some it defines cannot be
    read, such as ``alias $x=...``)."""
    names: set[str] = set()
    for match in _FUNCTION.finditer(line):
        names.add(match.group(1) or match.group(2))
    for program, arguments in _programs(line):
        if program != "alias":
            continue
        for argument in arguments:
            if argument is None:
                return None
            if "=" in argument and not argument.startswith("-"):
                names.add(argument.split("=", 1)[0])
    if re.search(r"BASH_ALIASES|BASH_CMDS", line):
        return None
    return names
