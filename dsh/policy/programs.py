"""What dsh knows about programs a command runs: wrappers, and options that run code.

:func:`~dsh.policy.unwrap.unwrap` takes one simple command's words and finds the program that really
runs: ``/bin/rm`` is ``rm``; ``timeout 5 nice -n 2 rm x`` runs ``rm x``; ``git -c
color.ui=never push`` is ``git push``; ``bash -c 'rm x'`` runs the script ``rm x``;
``find . -exec rm {} ;`` runs ``rm {}``. It also says what no allow rule may vouch
for (a program's option that runs another program, ``eval``, a ``-c`` value that
names a program) and what might run unseen.

The tables are the rule language's documented behaviour (``docs/security.md``): keep
them and the docs in step.
"""

from __future__ import annotations

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


def static_values(words: Sequence[Word]) -> list[str | None]:
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


def shell_script(values: list[str | None], found: Unwrapped) -> None:
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
