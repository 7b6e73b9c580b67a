"""The git configuration every process dsh starts runs under: a repository's files
cannot make git run a program.

A repository's ``config`` (its ``.git/config``, or the ``config`` of a bare-shaped
folder a project ships) can name programs git runs on the most harmless command:
``core.fsmonitor`` on ``git status``, hooks through ``core.hooksPath``, ``core.pager``,
``core.sshCommand``, ``gpg.program``, ``credential.helper``... Every child gets
command-scope settings (``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``),
which git reads after the repository's and which therefore win:

- ``safe.bareRepository=explicit``: a bare-shaped folder is never a repository by
  being where git looks (only through ``--git-dir``/``GIT_DIR``, which the permission
  engine never vouches for);
- each key that names a program takes the user's own value (their ``--global`` or
  ``--system`` config, read once in the folder dsh started in, so that an
  ``includeIf`` of theirs for this project applies; only their files are read), or
  else what git would fall back on without config, or a neutral value: fsmonitor
  off, hooks off.

What cannot be overridden by name (``filter.<driver>.*``, ``diff.<driver>.command``,
``diff.external``, ``alias.*``: a repository chooses the names) is the judge's: see
:func:`repository_programs`, which makes git commands in such a repository unchecked.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

SAFE_BASE = {"safe.bareRepository": "explicit"}
"""Settings fixed whatever the user's config says."""

_OWN_OR_NEUTRAL: dict[str, str | None] = {
    # key: its neutral value (None: computed from the environment, see _fallback)
    "core.fsmonitor": "false",
    "core.hooksPath": os.devnull,
    "core.pager": None,
    "core.editor": None,
    "sequence.editor": None,
    "core.sshCommand": None,
    "core.askPass": None,
    "core.alternateRefsCommand": "",
    "gpg.program": "gpg",
    "gpg.openpgp.program": "gpg",
    "gpg.x509.program": "gpgsm",
    "gpg.ssh.program": "ssh-keygen",
    "gpg.ssh.defaultKeyCommand": "",
    "protocol.ext.allow": "never",
}
"""Keys naming a program or letting one run, each given the user's own value or a
neutral one. (``uploadpack.packObjectsHook`` is not here: git reads it only from the
user's own config, and an empty value would break local fetches.)"""

_MULTI_RESET = ("credential.helper",)
"""Lists a repository adds to: an empty value clears what came before, then the
user's own values follow."""


def _fallback(key: str, env: Mapping[str, str]) -> str | None:
    """What git would use without any config for ``key`` (None: leave it unset)."""
    match key:
        case "core.pager":
            return env.get("PAGER") or "less"
        case "core.editor" | "sequence.editor":
            return env.get("VISUAL") or env.get("EDITOR") or "vi"
        case "core.sshCommand":
            ssh = env.get("GIT_SSH")
            return shlex.quote(ssh) if ssh else "ssh"
        case "core.askPass":
            return env.get("SSH_ASKPASS") or ""
    return None


_user_config: dict[str, tuple[str, ...]] | None = None
_user_config_lock = threading.Lock()


def user_git_config() -> dict[str, tuple[str, ...]]:
    """The user's own git settings (``--system`` then ``--global``), keys in lower case,
    values in order; {} without git. Read once a process, in the folder dsh started in
    (their ``includeIf "gitdir:..."`` sections apply as they would to git there); git
    reads only the user's files for it and runs nothing. The runtime reads it in a
    thread as it starts; a caller meanwhile waits for that read (some 10 ms of two git
    runs) rather than running git again."""
    global _user_config
    with _user_config_lock:
        if _user_config is None:
            _user_config = _read_user_git_config()
        return _user_config


def _read_user_git_config() -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    env = {
        **without_exported(os.environ),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.bareRepository",
        "GIT_CONFIG_VALUE_0": "explicit",
    }
    try:
        here = os.getcwd()
    except OSError:
        here = "/"
    for scope in ("--system", "--global"):
        try:
            done = subprocess.run(
                ["git", "config", scope, "--list", "-z"],
                cwd=here,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode != 0:
            continue  # no such file: nothing set there
        for entry in done.stdout.split(b"\0"):
            if not entry:
                continue
            key, _, value = entry.decode("utf-8", "surrogateescape").partition("\n")
            found.setdefault(key.lower(), []).append(value)
    return {key: tuple(values) for key, values in found.items()}


def _user_values(key: str, own: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    # git lists section and key names in lower case; no subsection of ours has capitals.
    return own.get(key.lower(), ())


def safe_git_settings(
    env: Mapping[str, str], own: Mapping[str, tuple[str, ...]] | None = None
) -> list[tuple[str, str]]:
    """The (key, value) pairs every child's git reads at command scope, in order."""
    mine = user_git_config() if own is None else own
    pairs = list(SAFE_BASE.items())
    for key, neutral in _OWN_OR_NEUTRAL.items():
        values = _user_values(key, mine)
        if values:
            pairs.append((key, values[-1]))
            continue
        value = neutral if neutral is not None else _fallback(key, env)
        if value is not None:
            pairs.append((key, value))
    for key in _MULTI_RESET:
        pairs.append((key, ""))
        pairs.extend((key, value) for value in _user_values(key, mine))
    return pairs


def git_environment_overrides(
    env: Mapping[str, str], own: Mapping[str, tuple[str, ...]] | None = None
) -> dict[str, str]:
    """``GIT_CONFIG_COUNT`` and its pairs for a child of ``env``: dsh's settings first,
    then those ``env`` already held (the user's own export, kept and winning)."""
    pairs = safe_git_settings(env, own)
    pairs.extend(_exported(env))
    found = {"GIT_CONFIG_COUNT": str(len(pairs))}
    mine = user_git_config() if own is None else own
    if "GIT_PROXY_COMMAND" not in env and not _user_values("core.gitProxy", mine):
        # core.gitProxy's first match wins, and a repository's comes first; the
        # variable, even empty, makes git read none of them.
        found["GIT_PROXY_COMMAND"] = ""
    for index, (key, value) in enumerate(pairs):
        found[f"GIT_CONFIG_KEY_{index}"] = key
        found[f"GIT_CONFIG_VALUE_{index}"] = value
    return found


def _exported(env: Mapping[str, str]) -> list[tuple[str, str]]:
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        return []
    pairs = []
    for index in range(max(0, min(count, 10_000))):
        key = env.get(f"GIT_CONFIG_KEY_{index}")
        if key:
            pairs.append((key, env.get(f"GIT_CONFIG_VALUE_{index}", "")))
    return pairs


def without_exported(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the ``GIT_CONFIG_COUNT`` family (to be replaced whole)."""
    return {
        name: value
        for name, value in env.items()
        if name != "GIT_CONFIG_COUNT" and not re.fullmatch(r"GIT_CONFIG_(KEY|VALUE)_\d+", name)
    }


# --------------------------------------------------------------- for the judge

_DRIVER_KEYS = re.compile(
    r"""
      diff\.external
    | (diff|merge|filter)\.[^\n]+\.(command|textconv|driver|clean|smudge|process)
    | alias\.[^\n]+
    | include\.path | includeif\.[^\n]+\.path
    | credential\.[^\n]+\.helper
    | remote\.[^\n]+\.(uploadpack|receivepack|vcs)
    | core\.gitproxy
    | pager\.[^\n]+
    | interactive\.difffilter
    | submodule\.[^\n]+\.update
    | (browser|man|guitool|difftool|mergetool)\.[^\n]+\.(cmd|path)
    | (sendemail|instaweb)\.[^\n]+
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""Settings naming programs under names the repository chooses (a driver, an alias,
a remote, a URL, a command's pager), which no command-scope setting can override by
name; an include brings in a file whose settings cannot be seen here; and the rarer
commands' programs (``git add -p``'s diff filter, ``git help``'s viewer, ``git
send-email``'s sendmail), judged here rather than given neutral values."""
_BOOLEAN = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})
"""A ``pager.<command>`` value that turns the pager on or off rather than naming one."""

_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)')
_KEY = re.compile(r"\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*)|$|[;#])")


def config_programs(text: str) -> str | None:
    """The first setting in a git config file's ``text`` that names a program under a
    chosen name (see ``_DRIVER_KEYS``), or None."""
    section = ""
    for line in text.removeprefix("\ufeff").splitlines():
        while True:
            header = _SECTION.match(line)
            if header is None:
                break
            name, subsection, line = header.groups()
            section = name if subsection is None else f"{name}.{subsection}"
            if "." in name:  # [section.sub] is the old spelling of a subsection
                section = name
        key = _KEY.match(line)
        if key is None or not section:
            continue
        full = f"{section}.{key.group(1)}"
        if not _DRIVER_KEYS.fullmatch(full):
            continue
        value = (key.group(2) or "").split("#")[0].split(";")[0].strip().strip('"').lower()
        if full.lower().startswith("pager.") and value in _BOOLEAN:
            continue
        return full
    return None


def _git_dir(start: Path) -> Path | None:
    """The git directory git would find from ``start`` (a ``.git`` folder, or the one a
    ``.git`` file points at), walking up; None when there is none."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            try:
                pointer = dot.read_text(errors="replace").strip()
            except OSError:
                return None
            if pointer.startswith("gitdir:"):
                target = Path(pointer[len("gitdir:") :].strip())
                return target if target.is_absolute() else folder / target
            return None
    return None


def repository_programs(start: Path) -> str | None:
    """Why a git command run in ``start`` may run a program its repository names (the
    setting, and the file), or None. Reads only the repository's own config files."""
    git_dir = _git_dir(start)
    if git_dir is None:
        return None
    files = [git_dir / "config", git_dir / "config.worktree"]
    common = git_dir / "commondir"
    if common.is_file():
        with contextlib.suppress(OSError):
            files.append((git_dir / common.read_text().strip()) / "config")
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        key = config_programs(text)
        if key is not None:
            return f"the repository's config names a program for git to run: {key} ({path})"
    return None


def with_safe_git(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the git settings every child runs under (its own exported
    ``GIT_CONFIG_COUNT`` entries kept, after dsh's)."""
    return {**without_exported(env), **git_environment_overrides(env)}
