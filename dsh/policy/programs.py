"""What dsh knows about programs a command runs: wrappers, and options that run code.

:func:`unwrap` takes one simple command's words and finds the program that really
runs: ``/bin/rm`` is ``rm``; ``timeout 5 nice -n 2 rm x`` runs ``rm x``; ``git -c
color.ui=never push`` is ``git push``; ``bash -c 'rm x'`` runs the script ``rm x``;
``find . -exec rm {} ;`` runs ``rm {}``. It also says what no allow rule may vouch
for (a program's option that runs another program, ``eval``, a ``-c`` value that
names a program) and what might run unseen.

The tables are the rule language's documented behaviour (``docs/security.md``): keep
them and the docs in step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dsh.policy.shell_words import Word

SYSTEM_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")
"""A program named by a path in these is the program of its base name for allow
rules too (``/usr/bin/git status`` under ``bash(git status:*)``)."""

SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish"})

RUNNERS = {
    "eval": "eval runs its arguments as a command",
    "source": "source runs a script",
    ".": ". runs a script",
    "trap": "trap runs its argument later",
    "fc": "fc runs commands from the history",
    "coproc": "coproc runs a command",
    "enable": "enable loads builtins",
    "alias": "alias redefines commands",
    "hash": "hash can point a name at another program",
    "let": "let evaluates arithmetic, which can run commands",
    "mapfile": "mapfile can run a callback",
    "readarray": "readarray can run a callback",
    "complete": "complete registers commands",
    "compgen": "compgen can run commands",
    "bind": "bind can run commands",
    "parallel": "parallel runs its arguments",
    "su": "su runs a command as another user",
    "runuser": "runuser runs a command as another user",
    "chroot": "chroot runs a command",
    "unshare": "unshare runs a command",
    "nsenter": "nsenter runs a command",
    "strace": "strace runs a command",
    "ltrace": "ltrace runs a command",
    "gdb": "gdb runs commands",
    "valgrind": "valgrind runs a command",
    "script": "script runs a command",
    "flock": "flock runs a command",
    "taskset": "taskset runs a command",
    "chrt": "chrt runs a command",
    "firejail": "firejail runs a command",
    "expect": "expect runs scripts",
    "osascript": "osascript runs scripts",
    "trickle": "trickle runs a command",
    "unbuffer": "unbuffer runs a command",
}
"""Programs and builtins that run or evaluate their arguments in ways not unwrapped
here: never vouched for by a rule, and they may hide what runs."""


@dataclass(frozen=True, slots=True)
class Layer:
    argv: tuple[Word, ...]
    wrapper: str | None = None
    """The wrapper at the head of ``argv`` (None on the last layer)."""
    privileged: bool = False
    """The wrapper changes who runs the program or its environment (sudo, env X=1):
    an allow rule must name the wrapper and the program together."""

    @property
    def program(self) -> str | None:
        return program_name(self.argv[0]) if self.argv else None


@dataclass(slots=True)
class Unwrapped:
    layers: list[Layer]
    open_ended: bool = False
    script: str | None = None
    """A shell script the command runs (``bash -c``), for the caller to analyse."""
    nested: list[tuple[Word, ...]] = field(default_factory=list)
    """Further commands it runs (``find -exec``)."""
    unchecked: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)

    def fail(self, why: str, *, hides: bool = True) -> None:
        self.unchecked.append(why)
        if hides:
            self.hidden.append(why)


def base_name(program: str) -> str:
    """``/bin/rm`` is ``rm``."""
    return program.rsplit("/", 1)[-1]


def program_name(word: Word) -> str | None:
    """The program a command word names: the base name of a path, None when computed."""
    if not word.static or word.value is None:
        return None
    value = word.value
    return base_name(value) if "/" in value.rstrip("/") else value


def _values(words: Sequence[Word]) -> list[str | None]:
    return [w.value if w.static else None for w in words]


# ----------------------------------------------------------------- wrappers

_Unwrap = Callable[[list[str | None], Unwrapped], "int | None"]
"""Given the values of a command's words (None: computed), the index where the wrapped
command starts, or None when this use is not a wrapper (``command -v x``)."""


def _options(
    values: list[str | None],
    *,
    flags: str = "",
    valued: str = "",
    long_flags: Sequence[str] = (),
    long_valued: Sequence[str] = (),
    start: int = 1,
) -> int:
    """The index of the first word after the options; -1 when an option is unknown or
    computed (then what runs cannot be told)."""
    i = start
    while i < len(values):
        value = values[i]
        if value is None:
            return -1
        if value == "--":
            return i + 1
        if not value.startswith("-") or value == "-":
            return i
        if value.startswith("--"):
            name = value.split("=", 1)[0]
            if name in long_flags:
                i += 1
                continue
            if name in long_valued:
                i += 1 if "=" in value else 2
                continue
            return -1
        j = 1
        while j < len(value):
            letter = value[j]
            if letter in valued:
                if j == len(value) - 1:
                    i += 1  # the value is the next word
                break
            if letter not in flags and not letter.isdigit():
                return -1
            j += 1
        i += 1
    return i


def _command(values: list[str | None], found: Unwrapped) -> int | None:
    at = _options(values, flags="pvV")
    if at < 0:
        return -1
    if any(v in ("-v", "-V") for v in values[1:at]):
        return None  # command -v only tells where a program is
    return at


def _exec(values: list[str | None], found: Unwrapped) -> int | None:
    return _options(values, flags="cl", valued="a")


def _env(values: list[str | None], found: Unwrapped) -> int | None:
    i = _options(
        values,
        flags="i0v",
        valued="uC",
        long_flags=("--ignore-environment", "--null", "--debug"),
        long_valued=("--unset", "--chdir"),
    )
    if i < 0:
        if any(v is not None and v.startswith(("-S", "--split-string")) for v in values):
            found.fail("env -S splits a string into a command")
        return -1
    if any(
        v is not None and (v.startswith("--chdir") or (v[:2] != "--" and "C" in v[1:]))
        for v in values[1:i]
        if v is not None and v.startswith("-")
    ):
        # git there reads whatever repository that folder holds.
        found.fail("env -C runs the command in another folder", hides=False)
    while i < len(values) and values[i] is not None and "=" in (values[i] or "")[1:]:
        name = (values[i] or "").split("=", 1)[0]
        if name.startswith("GIT_"):
            found.fail(f"env sets {name}, which changes what git reads or runs", hides=False)
        i += 1
    return i


def _nice(values: list[str | None], found: Unwrapped) -> int | None:
    return _options(values, valued="n", long_valued=("--adjustment",))


def _timeout(values: list[str | None], found: Unwrapped) -> int | None:
    i = _options(
        values,
        flags="v",
        valued="ks",
        long_flags=("--preserve-status", "--foreground", "--verbose"),
        long_valued=("--kill-after", "--signal"),
    )
    return -1 if i < 0 or i >= len(values) else i + 1  # then the duration


def _stdbuf(values: list[str | None], found: Unwrapped) -> int | None:
    return _options(values, valued="ioe", long_valued=("--input", "--output", "--error"))


def _time(values: list[str | None], found: Unwrapped) -> int | None:
    i = _options(
        values,
        flags="pvaq",
        valued="fo",
        long_flags=("--portability", "--verbose", "--append", "--quiet"),
        long_valued=("--format", "--output"),
    )
    if any(v is not None and v.startswith(("-o", "--output")) for v in values[1:i]):
        found.fail("time -o writes a file", hides=False)
    return i


def _xargs(values: list[str | None], found: Unwrapped) -> int | None:
    found.open_ended = True
    return _options(
        values,
        flags="0rtpxoeil",
        valued="adEILnPs",
        long_flags=("--null", "--no-run-if-empty", "--verbose", "--interactive", "--exit"),
        long_valued=(
            "--arg-file",
            "--delimiter",
            "--eof",
            "--replace",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ),
    )


def _sudo(values: list[str | None], found: Unwrapped) -> int | None:
    i = _options(
        values,
        flags="AbEHKknPSisBN",
        valued="ugChpDRTrtU",
        long_flags=(
            "--preserve-env",
            "--login",
            "--shell",
            "--non-interactive",
            "--stdin",
            "--background",
            "--set-home",
        ),
        long_valued=("--user", "--group", "--chdir", "--prompt", "--close-from"),
    )
    if i < 0:
        if any(v in ("-e", "-l", "-v", "--edit", "--list", "--validate") for v in values):
            return None
        return -1
    if any(v in ("-s", "-i", "--shell", "--login") for v in values[1:i]) and i < len(values):
        found.fail("sudo -s runs its arguments with a shell as another user")
        return -1
    return i


def _doas(values: list[str | None], found: Unwrapped) -> int | None:
    i = _options(values, flags="nsL", valued="uC")
    if i >= 0 and any(v == "-s" for v in values[1:i]) and i < len(values):
        found.fail("doas -s runs a shell")
        return -1
    return i


def _setsid(values: list[str | None], found: Unwrapped) -> int | None:
    return _options(values, flags="cfw", long_flags=("--ctty", "--fork", "--wait"))


def _ionice(values: list[str | None], found: Unwrapped) -> int | None:
    return _options(values, flags="t", valued="cn", long_valued=("--class", "--classdata"))


def _applet(values: list[str | None], found: Unwrapped) -> int | None:
    return 1 if len(values) > 1 and values[1] and not values[1].startswith("-") else None


def _watch(values: list[str | None], found: Unwrapped) -> int | None:
    i = _options(
        values,
        flags="dtbegcxpwq",
        valued="n",
        long_flags=(
            "--differences",
            "--no-title",
            "--beep",
            "--errexit",
            "--chgexit",
            "--color",
            "--exec",
            "--precise",
            "--no-wrap",
        ),
        long_valued=("--interval",),
    )
    if i < 0 or any(v in ("-x", "--exec") for v in values[1:i]):
        return i
    words = values[i:]
    if any(w is None for w in words):
        found.fail("watch runs a computed command")
        return -1
    found.script = " ".join(w for w in words if w is not None)
    return None


WRAPPERS: dict[str, tuple[_Unwrap, bool]] = {
    # name: (how to find the command it runs, whether it changes privileges/environment)
    "command": (_command, False),
    "builtin": (lambda values, found: 1, False),
    "exec": (_exec, False),
    "env": (_env, True),
    "nice": (_nice, False),
    "nohup": (lambda values, found: _options(values), False),
    "timeout": (_timeout, False),
    "stdbuf": (_stdbuf, False),
    "time": (_time, False),
    "xargs": (_xargs, False),
    "sudo": (_sudo, True),
    "doas": (_doas, True),
    "setsid": (_setsid, False),
    "ionice": (_ionice, False),
    "busybox": (_applet, False),
    "toybox": (_applet, False),
    "watch": (_watch, False),
}


def _shell(values: list[str | None], found: Unwrapped) -> None:
    """``bash -c SCRIPT``: the script; ``bash FILE`` or ``bash`` alone: unseen code."""
    i = 1
    script_flag = False
    while i < len(values):
        value = values[i]
        if value is None:
            found.fail("a shell with computed options")
            return
        if value in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if value == "--":
            i += 1
            break
        if value.startswith("--"):
            i += 1
            continue
        if value.startswith(("-", "+")) and len(value) > 1:
            script_flag = script_flag or "c" in value[1:]
            i += 1
            continue
        break
    if not script_flag:
        found.hidden.append("a shell runs a script the analysis cannot see")
        return
    if i >= len(values):
        found.fail("a shell -c without a script")
        return
    script = values[i]
    if script is None:
        found.fail("a shell runs a computed script")
        return
    found.script = script


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
    values = _values(argv)
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
    values = _values(argv)
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
    values = _values(argv)
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
    values = _values(argv)
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
    for value in _values(argv[1:]):
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
            start = wrapper[0](_values(current), found)
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
            _shell(_values(current), found)
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
