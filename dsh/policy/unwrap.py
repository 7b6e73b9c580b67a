"""Finding the program a command really runs: :func:`unwrap` looks through the
wrappers (:mod:`dsh.policy.programs` knows them) and into the options that run code
(``git -c``, ``find -exec``, ``sed``'s ``e``, ``awk``'s ``system``), saying what no
allow rule may vouch for and what might run unseen."""

from __future__ import annotations

import re

from dsh.policy.programs import (
    RUNNERS,
    SHELLS,
    WRAPPERS,
    Layer,
    Unwrapped,
    program_name,
    shell_script,
    static_values,
)
from dsh.policy.shell_words import Word

# ----------------------------------------------------------- options that run code

_GIT_GLOBAL_VALUED = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix")
_GIT_GLOBAL_FLAGS = (
    "--bare",
    "--no-pager",
    "-p",
    "--paginate",
    "-P",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--version",
    "--help",
    "-h",
    "--html-path",
    "--man-path",
    "--info-path",
)
_GIT_ELSEWHERE = {
    "-C": "runs git in another folder, on the repository found there",
    "--git-dir": "names the repository git reads",
    "--work-tree": "names the work tree git reads",
    "--bare": "makes the folder it runs in a repository",
}
"""Global options choosing the repository: never vouched for by a rule."""
_GIT_SAFE_KEYS = (
    r"(color|advice|column|i18n|user|author|committer|status|log|format|pretty|init|help"
    r"|gc|pack|fetch\.prune|pull\.rebase|pull\.ff|push\.default|merge\.conflictstyle"
    r"|rebase\.autosquash|diff\.(noprefix|renames|algorithm|mnemonicprefix|relative|context"
    r"|colormoved|indentheuristic)|core\.(quotepath|autocrlf|safecrlf|abbrev|filemode"
    r"|ignorecase|eol|whitespace|compression|precomposeunicode|longpaths))(\..*)?"
)
"""``git -c`` keys that cannot name a program; any other key (``core.fsmonitor``,
``core.pager``, ``alias.*``, ``diff.external``...) is asked about."""

_GIT_SUBCOMMAND_OPTIONS = (
    r"--(upload-pack|receive-pack|exec|extcmd|open-files-in-pager|template|config|output"
    r"|ext-diff|tool)\b.*"
)
_GIT_RUNNERS = {
    "bisect": "git bisect run runs a command",
    "submodule": "git submodule foreach runs a command",
    "filter-branch": "git filter-branch runs commands",
    "difftool": "git difftool runs a program",
    "mergetool": "git mergetool runs a program",
    "config": "git config can set what git runs (core.fsmonitor, alias.*)",
    "rebase": None,
    "grep": None,
    "clone": None,
}


def _git(argv: tuple[Word, ...], found: Unwrapped) -> tuple[Word, ...]:
    """git's words without its global options, which are checked."""
    values = static_values(argv)
    i, kept = 1, [argv[0]]
    while i < len(values):
        value = values[i]
        if value is None:
            found.fail("git with a computed option or subcommand")
            return argv
        if not value.startswith("-"):
            break
        name, _, attached = value.partition("=")
        if name in _GIT_ELSEWHERE:
            # Another repository than the project's, whose config may name programs
            # (a bare-shaped folder a project ships): git's own safe.bareRepository
            # lets an explicit one through.
            found.fail(f"git {name} {_GIT_ELSEWHERE[name]}", hides=False)
        if name in _GIT_GLOBAL_FLAGS:
            i += 1
            continue
        if name == "--exec-path" and not attached:
            i += 1
            continue
        if name in ("--exec-path", "--config-env"):
            found.fail(f"git {name} names programs to run")
            return argv
        if name in _GIT_GLOBAL_VALUED:
            given = attached if "=" in value else (values[i + 1] if i + 1 < len(values) else "")
            i += 1 if "=" in value else 2
            if name == "-c":
                key = (given or "").split("=", 1)[0]
                if given is None or not re.fullmatch(_GIT_SAFE_KEYS, key, re.I):
                    found.fail(f"git -c {key or '(computed)'} may name a program to run")
                    return argv
            continue
        found.fail(f"git with an unknown global option {value}")
        return argv
    kept.extend(argv[i:])
    rest = values[i:]
    sub = rest[0] if rest else None
    if sub in _GIT_RUNNERS:
        why = _GIT_RUNNERS[sub]
        if sub == "config":
            if not any(
                v in ("--get", "--get-all", "--get-regexp", "-l", "--list", "get", "list")
                for v in rest[1:]
            ):
                found.fail(why or "", hides=False)
        elif why is not None:
            found.fail(why)
    for value in rest[1:]:
        if value is None:
            continue
        if re.fullmatch(_GIT_SUBCOMMAND_OPTIONS, value) or (
            (sub in ("rebase",) and value in ("-x",))
            or (sub in ("grep",) and value.startswith("-O"))
        ):
            found.fail(f"git {sub} {value.split('=', 1)[0]} runs a program or writes a file")
        elif sub == "clone" and value in ("-u", "-c"):
            found.fail(f"git clone {value} names a program or a setting that runs one")
    return tuple(kept)


def _find(argv: tuple[Word, ...], found: Unwrapped) -> None:
    values = static_values(argv)
    i = 1
    while i < len(values):
        value = values[i]
        if value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(values) and values[end] not in (";", "+"):
                end += 1
            if value in ("-execdir", "-okdir") and i + 1 < end:
                runs = program_name(argv[i + 1])
                if runs is None or runs == "git" or runs in WRAPPERS or runs in SHELLS:
                    # In every folder found: git there reads that folder's repository.
                    found.fail(
                        f"find {value} runs {runs or 'a program'} in every folder", hides=False
                    )
            if i + 1 < len(argv) and end > i + 1:
                found.nested.append(argv[i + 1 : end])
            else:
                found.fail(f"find {value} without a command")
            i = end + 1
            continue
        if value is not None and value.startswith(("-fprint", "-fls")):
            found.fail(f"find {value} writes a file", hides=False)
        elif value == "-delete":
            found.fail("find -delete deletes what it finds", hides=False)
        i += 1


_SED_SIMPLE = set("dDgGhHlnNpPqQxz=")


def _sed_script_safe(script: str) -> bool:
    """Whether a sed script only prints, deletes and substitutes (no ``e``, ``w``, ``r``
    and no ``s///e`` or ``s///w``)."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!,0123456789$~+":
            i += 1
            continue
        if c == "/" or c == "\\":
            delimiter = "/" if c == "/" else (script[i + 1] if i + 1 < n else "")
            i = _sed_part(script, i + (1 if c == "/" else 2), delimiter)
            if i < 0:
                return False
            while i < n and script[i] in "IM":
                i += 1
            continue
        if c in _SED_SIMPLE:
            i += 1
            continue
        if c in "sy":
            if i + 1 >= n:
                return False
            delimiter = script[i + 1]
            i = i + 2
            for _ in range(2):
                i = _sed_part(script, i, delimiter)
                if i < 0:
                    return False
            if c == "s":
                start = i
                while i < n and script[i] in "gpiImM0123456789":
                    i += 1
                if (i < n and script[i] in "ew") or "e" in script[start:i]:
                    return False
            continue
        if c in "bt T:":
            while i < n and script[i] not in ";\n":
                i += 1
            continue
        if c in "aic":
            while i < n and script[i] != "\n":
                i += 1
            continue
        return False
    return True


def _sed_part(script: str, i: int, delimiter: str) -> int:
    while i < len(script):
        if script[i] == "\\":
            i += 2
            continue
        if script[i] == delimiter:
            return i + 1
        i += 1
    return -1


def _sed(argv: tuple[Word, ...], found: Unwrapped) -> None:
    values = static_values(argv)
    scripts: list[str | None] = []
    i, positional = 1, []
    while i < len(values):
        value = values[i]
        if value in ("-e", "--expression"):
            scripts.append(values[i + 1] if i + 1 < len(values) else None)
            i += 2
            continue
        if value is not None and value.startswith("--expression="):
            scripts.append(value.split("=", 1)[1])
        elif value in ("-f", "--file") or (value is not None and value.startswith("--file=")):
            found.fail("sed -f runs a script file")
            return
        elif value is None or not value.startswith("-") or value == "-":
            positional.append(value)
        i += 1
    if not scripts and positional:
        scripts.append(positional[0])
    for script in scripts:
        if script is None or not _sed_script_safe(script):
            found.fail("a sed script that may run commands or write files")
            return


_AWK_RUNS = r"system|\||getline|@load|@include|\b(print|printf)\b[^;}]*>"


def _awk(argv: tuple[Word, ...], found: Unwrapped) -> None:
    values = static_values(argv)
    i = 1
    while i < len(values):
        value = values[i]
        if value in ("-F", "-v"):
            i += 2
            continue
        if value is None or value.startswith(("-f", "--file", "-l", "--load", "-E", "--exec")):
            found.fail("awk runs a program file or a computed program")
            return
        if value.startswith("-") and value != "-":
            i += 1
            continue
        if re.search(_AWK_RUNS, value):
            found.fail("an awk program that may run commands or write files")
        return


_OPTIONS_THAT_RUN: dict[frozenset[str], str] = {
    frozenset({"rg"}): r"--pre(=.*)?|--pre-glob.*",
    frozenset({"sort"}): r"--compress-program.*|-o.*|--output.*",
    frozenset({"man"}): r"-[PHX].*|--pager.*|--html.*|--browser.*",
    frozenset(
        {"tar", "gtar", "bsdtar"}
    ): r"--(to-command|checkpoint-action|use-compress-program|info-script|new-volume-script"
    r"|rsh-command|rmt-command).*|-[IF].*",
    frozenset({"zip"}): r"-TT.*|--unzip-command.*",
    frozenset({"rsync"}): r"-e.*|--rsh.*|--rsync-path.*",
    frozenset(
        {"ssh", "scp", "sftp"}
    ): r"(?i)-o\s*(proxycommand|localcommand|permitlocalcommand|knownhostscommand|match)"
    r".*|-F.*|proxycommand.*",
    frozenset({"vim", "vi", "nvim", "view", "ex", "vimdiff"}): r"-[cS].*|--cmd|\+.*",
    frozenset({"less", "more"}): r"\+.*[!|].*",
    frozenset({"nc", "ncat", "netcat"}): r"-[ec].*|--(sh-)?exec.*|--lua-exec.*",
    frozenset({"socat"}): r"(?i).*\b(exec|system):.*",
    frozenset({"emacs"}): r"--eval.*|-l.*|--load.*|-f.*|--funcall.*|--batch",
}


_OPTIONS_BY_PROGRAM = {
    name: pattern for names, pattern in _OPTIONS_THAT_RUN.items() for name in names
}


def _program_options(name: str, argv: tuple[Word, ...], found: Unwrapped) -> None:
    pattern = _OPTIONS_BY_PROGRAM.get(name)
    if pattern is None:
        return
    for value in static_values(argv[1:]):
        if value is not None and re.fullmatch(pattern, value):
            found.fail(f"{name} {value[:40]} runs a program or writes a file")
            return


# ----------------------------------------------------------------------- unwrap


def is_plain_program(argv: tuple[Word, ...]) -> bool:
    """Whether the command runs its own program and nothing more (most commands):
    :func:`unwrap` would find nothing to look into."""
    name = program_name(argv[0]) if argv else None
    return name is not None and name not in _SPECIAL and name not in _OPTIONS_BY_PROGRAM


def unwrap(argv: tuple[Word, ...]) -> Unwrapped:
    """Look through the wrappers of one simple command (see the module's doc)."""
    if is_plain_program(argv):
        return Unwrapped(layers=[Layer(argv)])
    found = Unwrapped(layers=[])
    current = argv
    for _ in range(32):  # wrappers of wrappers, bounded
        if not current:
            found.fail("a wrapper without a command")
            break
        name = program_name(current[0])
        if name is None:
            found.fail(f"the program is computed at run time: {current[0].raw[:60]}")
            break
        wrapper = WRAPPERS.get(name)
        if wrapper is not None:
            start = wrapper[0](static_values(current), found)
            if start is None:
                break  # used as a plain program
            if start < 0:
                if not found.unchecked:
                    found.fail(f"{name} with options the analysis does not know")
                break
            if start >= len(current):
                break  # no command to run (env alone prints the environment)
            found.layers.append(Layer(current, name, privileged=wrapper[1]))
            current = current[start:]
            continue
        if name == "git" and len(current) > 1:
            plain = _git(current, found)
            if len(plain) != len(current):
                found.layers.append(Layer(current, "git"))
                current = plain
            break
        if name in RUNNERS:
            found.fail(RUNNERS[name])
        elif name in ("printf", "read") and any(
            (w.value is not None and w.value.startswith("-v")) or name == "read"
            for w in current[1:]
        ):
            found.fail(f"{name} can assign a variable whose name is evaluated")
        elif name in ("test", "[") and any(w.value in ("-v", "-R") for w in current[1:]):
            found.fail("test -v evaluates a variable name")
        elif name in SHELLS:
            shell_script(static_values(current), found)
            if found.script is not None and any(layer.privileged for layer in found.layers):
                found.fail("runs a script as another user or with a changed environment")
        elif name == "find":
            _find(current, found)
        elif name in ("sed", "gsed"):
            _sed(current, found)
        elif name in ("awk", "gawk", "mawk", "nawk"):
            _awk(current, found)
        else:
            _program_options(name, current, found)
        break
    else:
        found.fail("wrappers nest too deep")
    if current:
        found.layers.append(Layer(current))
    elif not found.layers:
        found.layers.append(Layer(argv))
    return found


_SPECIAL = frozenset(
    {*WRAPPERS, *RUNNERS, *SHELLS, "git", "find", "sed", "gsed", "awk", "gawk", "mawk", "nawk"}
    | {"printf", "read", "test", "["}
)
"""Programs :func:`unwrap` looks into; any other is what runs, as written."""
