"""Commands that read every file under a folder: where each one reads.

``grep -r SECRET .`` never names ``.env``, yet prints it; so does ``rg SECRET``, which
searches the working directory when given no folder. For a read deny rule or a secret
store to hold, a command that reads a folder's contents recursively is judged by the
folders it reads (:func:`recursive_reads`), and the checks ask whether a protected or
denied path could lie under one of them.

Known readers: ``grep``/``egrep``/``fgrep`` with ``-r``/``-R``/``--recursive``/``-d
recurse``, ``rg``, ``ag``, ``ack``, ``git grep``, ``find`` with ``-exec``/``-ok`` (and
whatever ``xargs`` feeds its names to), ``tar`` creating an archive, ``zip -r``, ``cp``
and ``scp`` with ``-r``/``-R``/``-a``, ``rsync`` and ``diff -r``. What only lists
names (``ls -R``, ``find -print``, ``du``) reads no contents and is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh.policy.globs import escape
from dsh.policy.programs import base_name
from dsh.policy.shell import Analysis, Invocation
from dsh.policy.shell_words import Word


@dataclass(frozen=True)
class RecursiveRead:
    program: str
    """How the command is shown: ``grep -r``, ``rg``."""
    folder: str
    """The folder as a bash pattern (``.`` when the command names none)."""


# Options that take the next word as their value, per program (short and long).
_GREP_VALUES = frozenset(
    (
        "-e",
        "-f",
        "-m",
        "-A",
        "-B",
        "-C",
        "-d",
        "-D",
        "--regexp",
        "--file",
        "--max-count",
        "--after-context",
        "--before-context",
        "--context",
        "--label",
        "--directories",
        "--devices",
        "--include",
        "--exclude",
        "--exclude-dir",
        "--exclude-from",
    )
)
_RG_VALUES = frozenset(
    (
        "-e",
        "-f",
        "-g",
        "-m",
        "-M",
        "-t",
        "-T",
        "-A",
        "-B",
        "-C",
        "-j",
        "-d",
        "-E",
        "-r",
        "--regexp",
        "--file",
        "--glob",
        "--iglob",
        "--type",
        "--type-not",
        "--max-count",
        "--max-columns",
        "--after-context",
        "--before-context",
        "--context",
        "--threads",
        "--max-depth",
        "--encoding",
        "--replace",
        "--pre",
        "--pre-glob",
        "--type-add",
        "--ignore-file",
        "--max-filesize",
        "--sort",
        "--sortr",
        "--colors",
        "--path-separator",
    )
)
_AG_VALUES = frozenset(("-G", "-g", "-m", "-A", "-B", "-C", "--ignore", "--depth", "-p"))
_PATTERN_OPTIONS = frozenset(("-e", "-f", "--regexp", "--file"))
_READERS_BY_NAME = frozenset(
    (
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "strings",
        "od",
        "xxd",
        "hexdump",
        "base64",
        "sed",
        "awk",
        "sort",
        "uniq",
        "nl",
        "tac",
        "cut",
        "paste",
        "cp",
        "tar",
        "zip",
        "rsync",
        "scp",
        "diff",
        "cmp",
        "md5sum",
    )
)


_WALKERS = frozenset(
    {"grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "ack-grep", "git", "cp", "scp"}
    | {"rsync", "diff", "zip", "tar", "find"}
)


def _values(argv: tuple[Word, ...]) -> list[str | None]:
    """The words after the program, as patterns (a static word's pattern characters
    escaped; a glob or brace word as bash will match it); None when computed."""
    return [
        w.pattern if w.pattern is not None else escape(w.value) if w.value is not None else None
        for w in argv[1:]
    ]


def _split(
    words: list[str | None], takes_value: frozenset[str]
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(options, (option, value) pairs, operands): ``--`` ends the options; a computed
    word is an operand (it could name anything: ``.`` stands for it)."""
    options: list[str] = []
    values: list[tuple[str, str]] = []
    operands: list[str] = []
    pending = False
    ended = False
    for word in words:
        if word is None:
            operands.append(".")
            pending = False
            continue
        if pending:
            values.append((options[-1], word))
            pending = False
        elif ended or not word.startswith("-") or word == "-":
            operands.append(word)
        elif word == "--":
            ended = True
        else:
            options.append(word)
            pending = word in takes_value
    return options, values, operands


def _short(options: list[str], letters: str) -> bool:
    """Whether a short option cluster (``-rn``) holds any of ``letters``."""
    return any(
        not o.startswith("--") and any(letter in o[1:] for letter in letters) for o in options
    )


def _searches(
    program: str, words: list[str | None], takes_value: frozenset[str], *, always: bool
) -> list[RecursiveRead]:
    options, _, operands = _split(words, takes_value)
    if not always:
        recursive = (
            _short(options, "rR")
            or any(o in ("--recursive", "--dereference-recursive") for o in options)
            or "--directories=recurse" in options
            or _value_after(words, "-d") == "recurse"
        )
        if not recursive:
            return []
        program = f"{program} -r"
    if program.startswith("rg") and any(o in ("--files", "--type-list") for o in options):
        return []  # names only
    given = any(o in _PATTERN_OPTIONS or o.startswith(("--regexp=", "--file=")) for o in options)
    folders = operands if given else operands[1:]
    return [RecursiveRead(program, folder) for folder in folders or ["."]]


def _value_after(words: list[str | None], option: str) -> str | None:
    for index, word in enumerate(words[:-1]):
        if word == option:
            return words[index + 1]
    return None


def _sources(program: str, words: list[str | None], *, recursive: str) -> list[RecursiveRead]:
    """cp, scp, rsync: the operands but the last (the destination), when recursive."""
    options, _, operands = _split(words, frozenset(("-t", "--target-directory", "-e", "-S")))
    long_forms = ("--recursive", "--archive", "--recursive=yes")
    if not (_short(options, recursive) or any(o in long_forms for o in options)):
        return []
    targeted = any(o in ("-t",) or o.startswith("--target-directory") for o in options)
    sources = operands if targeted else operands[:-1]
    return [RecursiveRead(f"{program} -r", s) for s in sources if ":" not in s]


def _tar(words: list[str | None]) -> list[RecursiveRead]:
    first = words[0] if words else None
    options, values, operands = _split(words, frozenset(("-f", "-C", "--file", "--directory")))
    mode = first if first is not None and not first.startswith("-") else ""
    creates = (
        "c" in mode
        or "r" in mode
        or _short(options, "cr")
        or any(o in ("--create", "--append") for o in options)
    )
    if not creates:
        return []
    folders = operands[1:] if mode else operands
    changed = [value for option, value in values if option in ("-C", "--directory")]
    return [RecursiveRead("tar c", f) for f in [*folders, *changed] or ["."]]


def _find(words: list[str | None]) -> list[str]:
    """The folders ``find`` walks (before its first expression word)."""
    folders: list[str] = []
    for word in words:
        if word is None:
            folders.append(".")
            continue
        if word in ("-H", "-L", "-P") or word.startswith("-O") or word == "-D":
            continue
        if word.startswith(("-", "(", "!", ")")) or word == ",":
            break
        folders.append(word)
    return folders or ["."]


def _git_grep(words: list[str | None]) -> list[RecursiveRead] | None:
    index = 0
    folder = "."
    while index < len(words):
        word = words[index]
        if word in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            if word == "-C" and index + 1 < len(words):
                folder = words[index + 1] or "."
            index += 2
            continue
        if word is not None and word.startswith("-"):
            index += 1
            continue
        if word != "grep":
            return None
        found = _searches("git grep", words[index + 1 :], _GREP_VALUES, always=True)
        if folder != ".":
            found.append(RecursiveRead("git grep", folder))
        return found
    return None


def recursive_reads(analysis: Analysis) -> list[RecursiveRead]:
    """Where each command of ``analysis`` that reads whole folders reads."""
    found: list[RecursiveRead] = []
    walked: list[str] = []
    open_ended: list[Invocation] = []
    for invocation in analysis.invocations:
        argv = invocation.argv
        if not argv or argv[0].value is None:
            continue
        name = base_name(argv[0].value)
        if invocation.open_ended and name in _READERS_BY_NAME:
            open_ended.append(invocation)
        if name not in _WALKERS:
            continue
        words = _values(argv)
        match name:
            case "grep" | "egrep" | "fgrep" | "zgrep":
                found += _searches(name, words, _GREP_VALUES, always=False)
            case "rg" | "ag" | "ack" | "ack-grep":
                takes_value = _AG_VALUES if name == "ag" else _RG_VALUES
                found += _searches(name, words, takes_value, always=True)
            case "git":
                found += _git_grep(words) or []
            case "cp" | "scp":
                found += _sources(name, words, recursive="rRa")
            case "rsync":
                found += _sources(name, words, recursive="ra")
            case "diff":
                options, _, operands = _split(words, frozenset())
                if _short(options, "r") or "--recursive" in options:
                    found += [RecursiveRead("diff -r", o) for o in operands]
            case "zip":
                options, _, operands = _split(words, frozenset())
                if _short(options, "rR") or "--recurse-paths" in options:
                    found += [RecursiveRead("zip -r", o) for o in operands[1:]]
            case "tar":
                found += _tar(words)
            case "find":
                folders = _find(words)
                walked += folders
                runs = ("-exec", "-execdir", "-ok", "-okdir")
                if any(w in runs for w in words):
                    found += [RecursiveRead("find -exec", f) for f in folders]
    for invocation in open_ended:
        name = base_name(invocation.argv[0].value or "")
        # xargs reads names from its input: from a find, what it walks; else anything
        # under the working directory.
        found += [RecursiveRead(f"xargs {name}", f) for f in walked or ["."]]
    return list(dict.fromkeys(found))
