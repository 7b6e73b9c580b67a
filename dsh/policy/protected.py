"""Protected paths and secret files: what no tool call changes unasked, and what no
tool shows the model.

Three lists, each checked against a path as named and with symlinks followed:

- **Refused**, for reads and writes alike, in every mode (bypass included): dsh's own
  keys and trust in ``$DSH_HOME``: ``credentials.json``, ``.env``, ``trust.toml`` and
  ``installation.key``. With them a model could spend the user's keys, trust a folder
  for itself or forge a session grant.
- **Protected from writes**, where a change makes something run later, outside any
  approval: any ``.git`` folder (``core.fsmonitor`` in its ``config`` runs on the next
  ``git status``; hooks run on commit) and a worktree's ``.git`` file, a project's
  ``.dsh`` folder and all of ``$DSH_HOME`` (settings can set the permission mode),
  shell start-up files, ``~/.ssh``, git's user settings, login autostarts, the
  start-up files of other programs (:data:`STARTUP_WRITES`: ``~/.local/bin``, editor,
  package manager and interpreter settings) and python's start-up files in any
  ``site-packages`` (``*.pth``, ``sitecustomize``, ``usercustomize``). Always
  asked, even in accept-edits; never granted for the session nor covered by an allow
  rule. Bypass allows them.
- **Secret stores** in the home folder (``~/.ssh``, ``~/.aws``, ``~/.netrc``...):
  reading one asks first in every mode but bypass, read-only included. A search over a
  wider folder leaves their files out of its results.

The home folder is ``Path.home()`` looked up at each call, and ``$DSH_HOME`` likewise,
so a changed ``HOME`` is honoured at once.

Commands are checked best effort (:func:`command_protections`): redirections are
writes, and a static word naming a refused file refuses the command. Without a
sandbox a command can still read anything its user can (``cd ~/.dsh; cat c*``); this
stops the plain ways, such as ``cat ~/.dsh/credentials.json`` in bypass mode.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dsh.paths import (
    CREDENTIALS_FILE,
    HOME_ENV_FILE,
    INSTALLATION_KEY_FILE,
    PROJECT_DIR,
    TRUST_FILE,
    dsh_home,
)
from dsh.policy.globs import (
    ANYTHING,
    MAX_MATCHES,
    MAX_PATTERN_LENGTH,
    MAX_PATTERNS,
    UNDER,
    Tokens,
    absolute_patterns,
    bash_tokens,
    could_match_any,
    fn_tokens,
    is_literal,
    literal,
    on_disk,
    options_possible,
    pattern_text,
    plain_path,
)
from dsh.policy.readers import recursive_reads
from dsh.policy.shell import analyse

_NEVER = "no tool may read or change it, in any mode"
REFUSED_FILES: dict[str, str] = {
    CREDENTIALS_FILE: f"dsh's stored API keys: {_NEVER}",
    HOME_ENV_FILE: f"dsh's API keys ($DSH_HOME/.env): {_NEVER}",
    TRUST_FILE: f"the list of folders you trust: {_NEVER}",
    INSTALLATION_KEY_FILE: f"the key that signs your session grants: {_NEVER}",
}
"""The files of ``$DSH_HOME`` no tool touches, and why."""

PROC = Path("/proc")
PROC_OWN = f"dsh's own process: its memory and environment hold your keys: {_NEVER}"
PROC_ENVIRON = f"a process's environment, which can hold your keys: {_NEVER}"
PROC_UNKNOWN = (
    f"a file of /proc that cannot be told from dsh's own process or a process's "
    f"environment, which can hold your keys: {_NEVER}"
)
_PROC_SELF = frozenset({"self", "thread-self"})
_PROC_SAMPLES = tuple(
    Path(p)
    for p in (
        "/proc/1/environ",
        "/proc/self/environ",
        "/proc/thread-self/environ",
        "/proc/1/task/1/environ",
    )
)
"""What a glob word is tried against: it could name a process's environment."""
_PROC_TEXT = re.compile(r"(?<![\w.-])/?proc(?![\w.-])")
"""``/proc`` or ``proc`` as a word of its own (``cd / && cd proc``), not a part of a
name (``PWNED_proc-x``)."""
_ENVIRON_TEXT = re.compile(r"(?<![\w.-])environ(?![\w.-])")
_PROC_COMPUTED_TEXT = re.compile(r"/proc/+[$`*?\[]")
"""A process chosen at run time (``/proc/$(pgrep dsh)/``, ``/proc/*/``): it may be dsh."""
_PROC_OWN_TEXT = re.compile(
    r"/proc/+(?:self|thread-self|\$\$|\$\{?(?:PPID|BASHPID)\}?|\$\{\$\})(?![\w-])"
)

GIT_RUNS = "this file can make git run programs"
GIT_DATA = "git's own folder: a change there can make git run programs or lose history"
DSH_SETTINGS = "dsh's own settings: they can change what runs without asking"
DSH_HOME_WHY = "dsh's own folder: its settings can change what runs without asking"
SHELL_STARTUP = "this file runs in every new shell"

_PYTHON_STARTS = "python runs it when it starts"
_PATH_FOLDER = "a program here runs in place of the one you name (it is early in $PATH)"
_EDITOR_STARTS = "your editor runs it when it starts"
_FETCHES = "it decides where packages are fetched from and what installs run"
STARTUP_WRITES: dict[str, str] = {
    **dict.fromkeys((".local/bin/", "bin/", ".cargo/bin/", "go/bin/"), _PATH_FOLDER),
    **dict.fromkeys(
        (".pythonrc", ".pythonrc.py", ".pythonstartup", ".config/python/", ".ipython/"),
        _PYTHON_STARTS,
    ),
    ".jupyter/": "jupyter runs its configuration files as Python",
    **dict.fromkeys(
        (
            ".config/pip/",
            ".pip/",
            ".pydistutils.cfg",
            ".condarc",
            ".npmrc",
            ".yarnrc",
            ".yarnrc.yml",
            ".config/yarn/",
            ".gemrc",
            ".cargo/config",
            ".cargo/config.toml",
            ".config/go/",
        ),
        _FETCHES,
    ),
    ".pypirc": "it names where and as whom your packages are published",
    **dict.fromkeys((".irbrc", ".pryrc", ".Rprofile"), "the interpreter runs it when it starts"),
    **dict.fromkeys(
        (
            ".vimrc",
            ".gvimrc",
            ".exrc",
            ".vim/",
            ".config/nvim/",
            ".emacs",
            ".emacs.el",
            ".emacs.d/",
            ".config/emacs/",
            ".nanorc",
            ".config/nano/",
            ".config/Code/User/settings.json",
            ".config/Code/User/tasks.json",
            ".config/Code/User/keybindings.json",
            ".config/VSCodium/User/settings.json",
            ".config/VSCodium/User/tasks.json",
        ),
        _EDITOR_STARTS,
    ),
    ".config/direnv/": "direnv runs it in every folder you enter",
    ".inputrc": "it can bind keys to commands in every shell",
    **dict.fromkeys(
        (".tmux.conf", ".config/tmux/", ".screenrc"), "it can run programs when a terminal starts"
    ),
    **dict.fromkeys(
        (".curlrc", ".wgetrc"), "it changes where and how every download goes, and what it writes"
    ),
    ".docker/config.json": "it names programs docker runs for logins",
    ".config/containers/": "it names programs podman runs",
    **dict.fromkeys(
        (".mailcap", ".config/mimeapps.list", ".local/share/applications/"),
        "it decides which program opens a file",
    ),
    **dict.fromkeys(
        (".gdbinit", ".config/gdb/", ".lldbinit", ".psqlrc", ".sqliterc", ".my.cnf"),
        "the program runs the commands in it when it starts",
    ),
}
"""Start-up files of other programs in the home folder (a write asks, as for
:data:`HOME_WRITES`): each makes a program run code, or fetch it, the next time it
starts. docs/security.md lists them with why."""

SITE_FOLDERS = frozenset({"site-packages", "dist-packages"})
SITE_STARTS = "python runs it at every start (a start-up file of site-packages)"
SITE_FOLDER = "python runs the *.pth and sitecustomize files put here at every start"


def _site_startup(path: PurePosixPath | Path) -> str | None:
    """Why ``path`` matters when it is a site-packages folder itself (a copy into it
    can name any file) or what python runs from one at every start: ``*.pth``,
    ``sitecustomize``, ``usercustomize`` (a module, a compiled one or a package), in
    any environment."""
    parts = path.parts
    for index, part in enumerate(parts):
        if part not in SITE_FOLDERS:
            continue
        if index == len(parts) - 1:
            return SITE_FOLDER
        name = parts[index + 1]
        if name.endswith(".pth") or name.split(".", 1)[0] in ("sitecustomize", "usercustomize"):
            return SITE_STARTS
    return None


# Relative to the home folder; a trailing "/" means the folder and all in it.
HOME_WRITES: dict[str, str] = {
    **dict.fromkeys(
        (
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".bash_aliases",
            ".profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".zlogin",
            ".zlogout",
            ".kshrc",
            ".mkshrc",
            ".cshrc",
            ".tcshrc",
            ".login",
            ".logout",
            ".config/fish/",
            ".config/nushell/",
            ".config/powershell/",
        ),
        SHELL_STARTUP,
    ),
    **dict.fromkeys(
        (".xprofile", ".xsessionrc", ".xinitrc", ".config/autostart/"),
        "this file runs when you log in",
    ),
    ".pam_environment": "this file sets the environment of every login",
    ".config/environment.d/": "these files set the environment of every login",
    ".config/systemd/user/": "services here run programs on their own",
    ".ssh/": "ssh's keys and settings: a change can let others log in, or run programs "
    "when you connect",
    ".gitconfig": "git's settings for all your projects: they can make git run programs",
    ".config/git/": "git's settings for all your projects: they can make git run programs",
    **STARTUP_WRITES,
}
"""Files in the home folder a write must ask for, and why."""

SECRET_STORES: dict[str, str] = {
    ".ssh/": "it holds your SSH keys",
    ".gnupg/": "it holds your GPG keys",
    ".aws/": "it holds your AWS credentials",
    ".azure/": "it holds your Azure credentials",
    ".config/gcloud/": "it holds your Google Cloud credentials",
    ".kube/config": "it holds your Kubernetes credentials",
    ".docker/config.json": "it holds your Docker registry logins",
    ".netrc": "it holds passwords for remote hosts",
    ".git-credentials": "it holds your saved git passwords",
    ".config/gh/hosts.yml": "it holds your GitHub CLI token",
    ".pgpass": "it holds your PostgreSQL passwords",
    ".pypirc": "it can hold your PyPI token",
    ".npmrc": "it can hold your npm token",
    ".cargo/credentials": "it holds your crates.io token",
    ".cargo/credentials.toml": "it holds your crates.io token",
    ".password-store/": "it holds your passwords",
    ".local/share/keyrings/": "it holds your desktop keyring",
}
"""Secret stores in the home folder: reading one asks first, in every mode but bypass."""

SEARCH_NOTE = "dsh's own keys and secret stores such as ~/.ssh are never searched"


@dataclass(frozen=True)
class Protection:
    """Why a path may not be touched unasked."""

    path: Path
    """The path as checked: absolute, as named."""
    reason: str
    """What the call does and why that matters, in the user's words:
    ``writes .git/config: this file can make git run programs``."""
    refused: bool = False
    """Refused in every mode, bypass included (dsh's keys and trust)."""
    why: str = ""
    """The reason without the call's part: ``this file can make git run programs``."""


# ---------------------------------------------------------------------- paths


def _absolute(path: Path | str, cwd: Path) -> Path:
    text = os.fspath(path)
    if text.startswith("~"):
        text = os.path.expanduser(text)
    return Path(os.path.normpath(os.path.join(cwd, text)))


def _forms(path: Path | str, cwd: Path) -> tuple[Path, ...]:
    """The path as named (absolute) and with symlinks followed, each once."""
    named = _absolute(path, cwd)
    real = Path(os.path.realpath(named))
    return (named,) if real == named else (named, real)


def _under(path: Path, base: Path) -> PurePosixPath | None:
    """``path`` relative to ``base`` (``.`` for itself), or None when outside."""
    try:
        return PurePosixPath(path.relative_to(base).as_posix())
    except ValueError:
        return None


def _homes() -> tuple[Path, ...]:
    return _folder_forms(os.path.expanduser("~"))


def _dsh_homes() -> tuple[Path, ...]:
    return _folder_forms(os.fspath(dsh_home()))


@functools.lru_cache(maxsize=16)
def _folder_forms(folder: str) -> tuple[Path, ...]:
    # Asked for every word of every command: the home folders, looked up once each.
    return _forms(folder, Path("/"))


def shown(path: Path, cwd: Path) -> str:
    """``path`` as the user would write it: relative inside ``cwd``, ``~/...`` in the
    home folder, else absolute."""
    for base in _forms(cwd, Path("/")):
        relative = _under(path, base)
        if relative is not None and str(relative) != ".":
            return str(relative)
    for home in _homes():
        relative = _under(path, home)
        if relative is not None:
            return "~" if str(relative) == "." else f"~/{relative}"
    return str(path)


def _match(relative: PurePosixPath, table: dict[str, str]) -> str | None:
    text = str(relative)
    for entry, why in table.items():
        if entry.endswith("/"):
            if text == entry[:-1] or text.startswith(entry):
                return why
        elif text == entry:
            return why
    return None


def _refused_why(path: Path) -> str | None:
    for home in _dsh_homes():
        relative = _under(path, home)
        if relative is not None and str(relative) in REFUSED_FILES:
            return REFUSED_FILES[str(relative)]
    return None


def _proc_why(path: Path, *, named: bool = True) -> str | None:
    """Why ``path`` (absolute, normalised) is refused as a process's secrets: any
    process's ``environ`` (its tasks' too), and everything of dsh's own process as
    named. Followed from another name (``named`` False), only an ``environ``: here
    ``/dev/stdin`` leads to dsh's own descriptors, while the command or tool that
    opens it reads its own."""
    parts = path.parts
    if len(parts) < 3 or parts[1] != "proc" or parts[0] != "/":
        return None
    if named and (parts[2] in _PROC_SELF or parts[2] == str(os.getpid())):
        return PROC_OWN
    if "environ" in parts[3:]:
        return PROC_ENVIRON
    return None


def refused_paths() -> list[Path]:
    """Every form (named, real) of every refused file, whether it exists or not."""
    return [home / name for home in _dsh_homes() for name in REFUSED_FILES]


def _write_why(path: Path) -> str | None:
    parts = path.parts
    if ".git" in parts:
        rest = parts[len(parts) - parts[::-1].index(".git") :]
        # The folder itself, a worktree's .git file (it says where git's data is),
        # config, hooks: each decides what git runs.
        if not rest or rest[-1] == "config" or "hooks" in rest or rest[0] == "info":
            return GIT_RUNS
        return GIT_DATA
    if (why := _git_dir_why(path)) is not None:
        return why
    if any(_under(path, home) is not None for home in _dsh_homes()):
        return DSH_HOME_WHY
    if PROJECT_DIR in parts:
        return DSH_SETTINGS
    return _site_startup(path) or _in_home(path, HOME_WRITES)


GIT_SHAPED = "a folder git takes for a repository: its files can make git run programs"
GIT_MAKES = "this file can make a folder a git repository, whose config can make git run programs"
_GIT_MARKERS = frozenset({"HEAD", "commondir"})
"""A git directory is a folder with a ``HEAD`` beside ``objects/`` and ``refs/`` (or a
``commondir`` naming where those are)."""


def _git_dir_why(path: Path) -> str | None:
    """Why ``path`` is git's data though no ``.git`` names it: it is in a folder git
    would take for a repository (a bare one a project ships), or it is the file that
    would make its folder one. Protected like ``.git/``, so that no write plants a
    repository whose config the user's own git obeys later."""
    if path.name in _GIT_MARKERS:
        return GIT_MAKES
    for folder in (path, *path.parents):
        if _is_git_dir(folder):
            return GIT_SHAPED
    return None


def _is_git_dir(folder: Path) -> bool:
    try:
        if not (folder / "HEAD").is_file():
            return (folder / "commondir").is_file()
        return (folder / "objects").is_dir() and (folder / "refs").is_dir()
    except (OSError, ValueError):
        return False


def _secret_store_why(path: Path) -> str | None:
    return _in_home(path, SECRET_STORES)


def _in_home(path: Path, table: dict[str, str]) -> str | None:
    """Why ``path`` is in ``table`` (entries relative to the home folder), if it is."""
    for home in _homes():
        relative = _under(path, home)
        if relative is not None and (why := _match(relative, table)) is not None:
            return why
    return None


def _same_file(path: Path) -> Path | None:
    """The refused file ``path`` is, by identity: a hard link, or another spelling on a
    filesystem that ignores case."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    for refused in refused_paths():
        try:
            other = os.stat(refused)
        except OSError:
            continue
        if (status.st_dev, status.st_ino) == (other.st_dev, other.st_ino):
            return refused
    return None


def refusal(path: Path | str, cwd: Path, verb: str = "reads") -> Protection | None:
    """A refusal when ``path`` is one of dsh's keys or its trust store (as named,
    through a symlink, or as a hard link), else None."""
    forms = _forms(path, cwd)
    for form in forms:
        why = _refused_why(form) or _proc_why(form, named=form is forms[0])
        if why is not None:
            return Protection(form, f"{verb} {shown(form, cwd)}: {why}", refused=True, why=why)
    same = _same_file(forms[-1])
    if same is not None:
        why = _refused_why(same) or _NEVER
        said = f"{verb} {shown(forms[0], cwd)}, which is {shown(same, cwd)}: {why}"
        return Protection(forms[0], said, refused=True, why=why)
    return None


def write_protection(path: Path | str, cwd: Path) -> Protection | None:
    """Why writing ``path`` must be asked every time (or is refused outright), or None
    for an ordinary path. Relative paths are taken from ``cwd``."""
    return _protection(path, cwd, "writes", _write_why)


def read_protection(path: Path | str, cwd: Path) -> Protection | None:
    """Why reading ``path`` (a file, or a folder to search) is refused or must be asked
    first, or None."""
    return _protection(path, cwd, "reads", _secret_store_why)


def _protection(
    path: Path | str, cwd: Path, verb: str, why_of: Callable[[Path], str | None]
) -> Protection | None:
    refused = refusal(path, cwd, verb)
    if refused is not None:
        return refused
    for form in _forms(path, cwd):
        why = why_of(form)
        if why is not None:
            return Protection(form, f"{verb} {shown(form, cwd)}: {why}", why=why)
    return None


class SecretFilter:
    """For a search from ``root``: whether a file it found must be left out of what
    the model reads. Refused files always are; files in a secret store are, unless
    the search started inside that store (its reading was asked for already).

    Built once per search; the real path of each folder is looked up once. Files found
    by walking are never symlinks (ripgrep does not follow them), so a file's own
    name is not resolved, and a search whose root holds no secret (as named or
    resolved) can hide nothing: it is not looked at further."""

    def __init__(
        self, root: Path | None = None, *, denied: Callable[[Path], bool] | None = None
    ) -> None:
        """``denied``: also leave out what this says (the deny rules' ``read(...)``)."""
        self._denied = denied
        self._refused = refused_paths()
        stores: list[Path] = []
        roots = _forms(root, Path("/")) if root is not None else ()
        for home in _homes():
            for entry in SECRET_STORES:
                store = home / entry.rstrip("/")
                if not any(_under(r, store) is not None for r in roots):
                    stores.append(store)
        self._stores = stores
        self._anywhere = root is None or any(
            _under(secret, r) is not None
            for secret in (*self._refused, *stores, PROC)
            for r in roots
        )
        self._folders: dict[str, Path] = {}
        self.skipped = 0
        """How many files the filter left out so far."""
        self.denied = 0
        """How many of them a deny rule hid."""

    def hidden(self, path: Path) -> bool:
        if self._denied is not None and self._denied(path):
            self.skipped += 1
            self.denied += 1
            return True
        if not self._anywhere:
            return False
        folder = str(path.parent)
        real_folder = self._folders.get(folder)
        if real_folder is None:
            real_folder = self._folders[folder] = Path(os.path.realpath(folder))
        for form in (path, real_folder / path.name):
            if (
                form in self._refused
                or any(_under(form, s) is not None for s in self._stores)
                or _proc_why(form) is not None
            ):
                self.skipped += 1
                return True
        return False

    def note(self) -> str:
        """A line for the model when files were left out, else empty."""
        if not self.skipped:
            return ""
        files = "file" if self.skipped == 1 else "files"
        why = SEARCH_NOTE if self.denied < self.skipped else ""
        if self.denied:
            why = f"{why}; " if why else ""
            why += "the user's deny rules hide some files from every reading tool"
        return f"\n\n({self.skipped} {files} left out: {why}.)"


# ---------------------------------------------------------------------- commands

_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_GLOB = frozenset("*?[")


def _expand(word: str, cwd: Path) -> Path | None:
    """A command's static word as a path: ``~``, ``$HOME`` and ``$DSH_HOME`` expanded,
    relative to ``cwd``; None when it holds any other variable."""
    if "$" not in word:
        return _absolute(word, cwd) if word and "\x00" not in word else None
    values = {"HOME": str(Path.home()), "DSH_HOME": str(dsh_home())}
    unknown = False

    def value(match: re.Match[str]) -> str:
        nonlocal unknown
        name = match.group(1) or match.group(2)
        if name not in values:
            unknown = True
            return ""
        return values[name]

    text = _VARIABLE.sub(value, word)
    if unknown or not text or "\x00" in text:
        return None
    return _absolute(text, cwd)


def is_path_text(text: str) -> bool:
    """Whether ``text`` could name a file: a NUL byte (``$'\\0'``) or a lone surrogate
    (hostile JSON) cannot be passed to the system at all, so such a word names nothing."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def named_paths(command: str, cwd: Path) -> list[Path]:
    """The paths a command's static words could name, each once, as
    :func:`command_protections` reads them (``--out=FILE``, ``@FILE``, ``~``,
    ``$HOME``, ``$DSH_HOME``; relative to ``cwd``)."""
    paths: dict[Path, None] = {}
    for word in dict.fromkeys(analyse(command).words):
        if not is_path_text(word):
            continue
        for candidate in _candidates(word):
            path = _expand(candidate, cwd)
            if path is not None:
                paths[path] = None
    return list(paths)


def _candidates(word: str) -> list[str]:
    """The word, and what follows an ``=`` or a leading ``@`` in it (``--out=FILE``,
    ``of=FILE``, ``curl -d @FILE``)."""
    found = [word]
    if "=" in word:
        found.append(word.split("=", 1)[1])
    if word.startswith("@"):
        found.append(word[1:])
    return [w for w in found if w]


def _variable(name: str, *also: str) -> str:
    """A pattern for ``$NAME/``, ``${NAME}/`` and ``${NAME:-...}/`` (and ``also``)."""
    forms = [rf"\${name}\b", rf"\$\{{{name}\b[^}}]*\}}", *(re.escape(a) for a in also)]
    return "(?:" + "|".join(forms) + ")/+"


def _mentions_refused(text: str) -> list[Path]:
    """Refused files a text names literally: by absolute path, ``~/...``, or
    ``$DSH_HOME/...`` in any of its spellings."""
    found = []
    homes = [str(h) for h in _homes()]
    for path in refused_paths():
        if path.name not in text:
            continue  # every spelling ends with the file's name
        spellings = [re.escape(str(path))]
        for home in homes:
            relative = _under(path, Path(home))
            if relative is not None:
                spellings.append(_variable("HOME", "~") + re.escape(str(relative)))
        spellings.append(_variable("DSH_HOME") + re.escape(path.name))
        if re.search("|".join(f"(?:{s})(?![\\w.-])" for s in spellings), text):
            found.append(path)
    return found


def command_protections(command: str, cwd: Path) -> list[Protection]:
    """What a shell command touches that needs more than the usual approval: files its
    redirections write (as :func:`write_protection` sees them), refused files any of
    its static words names (refused, whatever the mode), and protected paths its words
    name (so no allow rule or grant vouches for ``cp x .git/hooks/pre-commit``)."""
    parsed = analyse(command)
    found: list[Protection] = []
    words = _path_words(parsed.words)
    for target in parsed.writes:
        if not is_path_text(target):
            continue
        path = _expand(target, cwd)
        protection = write_protection(path, cwd) if path is not None else None
        if protection is not None:
            found.append(protection)
    refused = refused_paths()
    ordinary = _Ordinary(cwd)
    for word in words:
        for candidate in _candidates(word):
            if ordinary(candidate):
                continue
            path = _expand(candidate, cwd)
            if path is None:
                continue
            if _GLOB & set(candidate):
                matched = [r for r in refused if _glob_matches(path, r)]
                if matched:
                    found.append(_refused_name(matched[0], cwd))
                continue
            protection = refusal(path, cwd, "names")
            if protection is None and (why := _word_why(path) or _store_why(path)) is not None:
                protection = Protection(path, f"names {shown(path, cwd)}: {why}", why=why)
            if protection is not None:
                found.append(protection)
    found.extend(_refused_name(path, cwd) for path in _mentions_refused(command))
    found.extend(_mentions_proc(command, words, cwd))
    found += pattern_protections(command, cwd)
    found += recursive_protections(command, cwd)
    return _unique(found)


def _path_words(words: Iterable[str]) -> list[str]:
    """The words that may name a file, each spelling once: an option (-v, --short)
    names none, unless it holds one (--output=FILE), which _candidates finds."""
    return [
        w for w in dict.fromkeys(words) if (not w.startswith("-") or "=" in w) and is_path_text(w)
    ]


def _mentions_proc(command: str, words: list[str], cwd: Path) -> list[Protection]:
    """Refusals for a command that could read a process's environment or dsh's own
    process through ``/proc``: by a spelling its static words hide (``/proc/$PPID``,
    ``/proc/$$``, ``cd /proc/1 && cat environ``, a glob such as ``/pro?/*/envir*``),
    not only by a path the words name outright (:func:`refusal` sees those)."""
    texts = [command, " ".join(words)]
    # A glob may spell "proc" (`/pr?c/1/environ`): those are tried below.
    if not any(_PROC_TEXT.search(t) for t in texts) and not any(_GLOB & set(w) for w in words):
        return []
    found: list[Protection] = []
    where = PROC / "<pid>"
    if any(_PROC_OWN_TEXT.search(text) for text in texts):
        found.append(Protection(where, f"names /proc: {PROC_OWN}", True, PROC_OWN))
    elif any(_PROC_TEXT.search(t) and _ENVIRON_TEXT.search(t) for t in texts):
        why = PROC_ENVIRON
        found.append(Protection(where, f"names /proc: {why}", True, why))
    elif _PROC_COMPUTED_TEXT.search(command):
        found.append(Protection(where, f"names /proc: {PROC_UNKNOWN}", True, PROC_UNKNOWN))
    for word in words:
        for candidate in _candidates(word):
            if _GLOB & set(candidate):
                path = _expand(candidate, cwd)
                if path is not None and any(_glob_matches(path, s) for s in _PROC_SAMPLES):
                    why = PROC_ENVIRON
                    found.append(
                        Protection(path, f"names {candidate}: {why}", refused=True, why=why)
                    )
            elif "$" in candidate and _PROC_TEXT.search(candidate):
                path = PROC / "<pid>"
                found.append(
                    Protection(path, f"names {candidate}: {PROC_UNKNOWN}", True, PROC_UNKNOWN)
                )
    return found


class _Ordinary:
    """A quick first look at a command's word: True when the path it names cannot be
    protected (not under a protected folder, nothing there yet, no link on the way), so
    the full checks are left for the few words that might be. A command of thousands
    of words is decided in milliseconds this way."""

    def __init__(self, cwd: Path) -> None:
        roots = [os.fspath(home) for home in _dsh_homes()]
        for home in _homes():
            roots += [os.path.join(home, e.rstrip("/")) for e in (*HOME_WRITES, *SECRET_STORES)]
        self._cwd = os.fspath(cwd)
        self._roots = tuple(roots)
        self._under_roots = tuple(root + "/" for root in roots)
        self._known: dict[str, bool] = {}
        self._listing: frozenset[str] | None = None
        self._plain_cwd = False

    def __call__(self, word: str) -> bool:
        if "$" in word or "\x00" in word or _GLOB & set(word):
            return False
        if os.path.basename(word.rstrip("/")) in _GIT_MARKERS:
            return False  # it would make its folder a repository, wherever that is
        if "-packages" in word and SITE_FOLDERS.intersection(word.split("/")):
            return False  # a site-packages folder is protected wherever it is
        first = word.split("/", 1)[0]
        if first and first not in (".", "..", "~") and not word.startswith("~"):
            # Relative: when its first part is not in the working directory, nothing
            # is there and no link is on the way (one listing for the whole command).
            names = self._names()
            if names is not None and first not in names:
                return True
        if word.startswith("~"):
            word = os.path.expanduser(word)
        text = os.path.normpath(os.path.join(self._cwd, word))
        parts = text.split("/")
        if ".git" in parts or PROJECT_DIR in parts:
            return False
        if text in self._roots or text.startswith(self._under_roots):
            return False
        if os.path.lexists(text):
            return False  # it exists: a link, a hard link? the full checks say
        # Nothing there yet: the nearest folder that exists must be where it says it is,
        # and not in a repository no .git names (a hook new in a bare-shaped folder).
        return self._plain_folder(os.path.dirname(text)) and _git_dir_why(Path(text)) is None

    def _names(self) -> frozenset[str] | None:
        """What the working directory holds, when it is a plain folder (no link, not
        protected itself); None otherwise (every word then gets the full look)."""
        if self._listing is None:
            cwd = self._cwd
            parts = cwd.split("/")
            plain = (
                ".git" not in parts
                and PROJECT_DIR not in parts
                and cwd not in self._roots
                and not cwd.startswith(self._under_roots)
                and os.path.realpath(cwd) == cwd
            )
            try:
                self._listing = frozenset(os.listdir(cwd)) if plain else frozenset()
                self._plain_cwd = plain
            except OSError:
                self._listing, self._plain_cwd = frozenset(), False
        return self._listing if self._plain_cwd else None

    def _plain_folder(self, folder: str) -> bool:
        missing = []  # folders not there, nearest first: they share the answer
        known = self._known.get(folder)
        while known is None:
            if os.path.lexists(folder):
                known = os.path.realpath(folder) == folder
                break
            missing.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                known = True
                break
            folder = parent
            known = self._known.get(folder)
        for path in (*missing, folder):
            self._known[path] = known
        return known


def _glob_matches(pattern: Path, path: Path) -> bool:
    """Whether bash would expand ``pattern`` to ``path``: part by part, and a name
    starting with a dot only by a pattern part that does too."""
    if len(pattern.parts) != len(path.parts):
        return False
    return all(
        fnmatch.fnmatchcase(name, part) and (part.startswith(".") or not name.startswith("."))
        for part, name in zip(pattern.parts, path.parts, strict=True)
    )


def _word_why(path: Path) -> str | None:
    for form in _forms(path, Path("/")):
        why = _write_why(form)
        if why is not None:
            return why
    return None


def _refused_name(path: Path, cwd: Path) -> Protection:
    why = _refused_why(path) or _NEVER
    return Protection(path, f"names {shown(path, cwd)}: {why}", refused=True, why=why)


def _unique(found: Iterable[Protection]) -> list[Protection]:
    # Refusals first: they decide the verdict.
    seen: dict[tuple[Path, bool], Protection] = {}
    for protection in found:
        seen.setdefault((protection.path, protection.refused), protection)
    return sorted(seen.values(), key=lambda p: not p.refused)


# ---------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class _Covered:
    """A protected or secret path as fnmatch patterns, for comparing with globs."""

    patterns: tuple[Tokens, ...]
    path: Path | None
    """The path, or None for a name protected anywhere (``.git``)."""
    name: str
    """For a name protected anywhere: that name."""
    folder: bool
    """The folder and all in it."""
    why: str
    refused: bool = False
    read: bool = False
    """Its reading is protected (dsh's keys, a secret store), not only its writing."""

    def shown(self, cwd: Path) -> str:
        if self.path is None:
            return f"{self.name}/"
        return shown(self.path, cwd) + ("/" if self.folder else "")

    def under(self, folder: str) -> bool:
        """Whether this path lies under ``folder`` (absolute, normalised), or the
        folder inside it (a name protected anywhere may lie under any folder)."""
        if self.path is None:
            return True
        text = os.fspath(self.path)
        base = folder.rstrip("/") + "/"
        return text.startswith(base) or (self.folder and (folder + "/").startswith(text + "/"))


def _entry(base: Path, entry: str, why: str, **kind: bool) -> _Covered:
    path = base / entry.rstrip("/")
    exact = literal(os.fspath(path))
    folder = entry.endswith("/") or not entry
    patterns = (exact, exact + literal("/") + ANYTHING) if folder else (exact,)
    return _Covered(patterns, path, "", folder, why, **kind)


def _covered() -> tuple[_Covered, ...]:
    """Every protected, refused and secret path, as patterns; refusals first."""
    return _covered_in(_homes(), _dsh_homes())


@functools.lru_cache(maxsize=8)
def _covered_in(homes: tuple[Path, ...], dsh_homes: tuple[Path, ...]) -> tuple[_Covered, ...]:
    found = []
    for home in dsh_homes:
        for name, why in REFUSED_FILES.items():
            found.append(_entry(home, name, why, refused=True, read=True))
    for home in homes:
        found += [_entry(home, e, why, read=True) for e, why in SECRET_STORES.items()]
    for name, why in ((".git", GIT_DATA), (PROJECT_DIR, DSH_SETTINGS)):
        patterns = (fn_tokens(f"*/{name}"), fn_tokens(f"*/{name}/*"))
        found.append(_Covered(patterns, None, name, True, why))
    found += [_entry(home, "", DSH_HOME_WHY) for home in dsh_homes]
    for home in homes:
        found += [_entry(home, e, why) for e, why in HOME_WRITES.items()]
    return tuple(found)


def _variables() -> dict[str, str]:
    return {"HOME": os.path.expanduser("~"), "DSH_HOME": os.fspath(dsh_home())}


def pattern_forms(word: str, cwd: Path) -> list[Tokens]:
    """A pattern word (``.gi?/config``, ``--out=*.txt``, ``~/.bas{h,}rc``) as the
    absolute bash patterns it could expand to, from ``cwd`` as named and resolved."""
    found: list[Tokens] = []
    variables = _variables()
    for candidate in _candidates(word):
        for base in _folder_forms(os.fspath(cwd)):
            found += [bash_tokens(t) for t in absolute_patterns(candidate, base, variables)]
    return list(dict.fromkeys(found))


def pattern_protections(command: str, cwd: Path) -> list[Protection]:
    """What the glob and brace words of a command could name that is protected,
    refused or secret, whether or not it exists yet (``cp x .gi?/config`` could write
    ``.git/config``); and what they match on disk now, checked as a named path is
    (a link to ``.git`` under another name). A word bash expands differently once
    ``dotglob``, ``globstar`` or ``nocaseglob`` is on is read as if they were, when
    the command could set them."""
    words = _path_words(analyse(command).patterns)
    if not words:
        return []
    found: list[Protection] = []
    checked = [w for w in words if len(w) <= MAX_PATTERN_LENGTH][:MAX_PATTERNS]
    if len(checked) < len(words):
        # Comparing takes time for each: past a bound, the user looks instead.
        too_many = f"more than {MAX_PATTERNS} patterns, or one longer than any path"
        found.append(Protection(cwd, f"names {too_many}: too many to check", why=too_many))
    options = options_possible(command)
    covered = _covered()
    for word in checked:
        said = word.replace("\\", "")
        for tokens in pattern_forms(word, cwd):
            path = Path(pattern_text(tokens))
            for entry in covered:
                if could_match_any(tokens, entry.patterns, options=options):
                    reason = f"names {said}, which could be {entry.shown(cwd)}: {entry.why}"
                    found.append(Protection(path, reason, refused=entry.refused, why=entry.why))
                    break
            found += _matched_now(tokens, said, cwd, hidden=options)
    return _unique(found)


def _matched_now(tokens: Tokens, said: str, cwd: Path, *, hidden: bool) -> list[Protection]:
    matches = on_disk(tokens, hidden=hidden)
    if matches is None:
        many = f"it matches more than {MAX_MATCHES} files, too many to check"
        return [Protection(Path(pattern_text(tokens)), f"names {said}: {many}", why=many)]
    found: list[Protection] = []
    for match in matches:
        protection = refusal(match, cwd, "names")
        why = _word_why(match) or _store_why(match)
        if protection is None and why is not None:
            reason = f"names {said}, which is {shown(match, cwd)}: {why}"
            protection = Protection(match, reason, why=why)
        if protection is not None:
            found.append(protection)
    return found


def _store_why(path: Path) -> str | None:
    for form in _forms(path, Path("/")):
        why = _secret_store_why(form)
        if why is not None:
            return why
    return None


def recursive_protections(command: str, cwd: Path) -> list[Protection]:
    """Folders a command reads whole (``grep -r x ~``, ``tar c .``) that hold dsh's
    keys (refused) or a secret store (asked): their files would be read unnamed."""
    found: list[Protection] = []
    covered = [entry for entry in _covered() if entry.read]
    options = options_possible(command)
    for read in recursive_reads(analyse(command)):
        if not is_path_text(read.folder):
            continue
        plain = plain_path(read.folder)  # most folders: compared as paths
        named = _expand(plain, cwd) if plain is not None else None
        if named is not None:
            # A folder not there yet holds nothing to read (and has no link to follow).
            paths = _forms(named, cwd) if os.path.lexists(named) else (named,)
            forms: list[tuple[str, Tokens]] = [(os.fspath(f), ()) for f in paths]
        else:
            forms = [(pattern_text(t), t) for t in folder_forms(read.folder, cwd)]
        folder = read.folder.replace("\\", "")
        for text, tokens in forms:
            for entry in covered:
                if tokens:
                    holds = could_match_any(tokens + UNDER, entry.patterns, options=options)
                else:
                    holds = entry.under(text)
                if holds:
                    said = f"{read.program} reads all of {folder}, which holds {entry.shown(cwd)}"
                    reason = f"{said}: {entry.why}"
                    found.append(
                        Protection(Path(text), reason, refused=entry.refused, why=entry.why)
                    )
                    break
    return _unique(found)


def folder_forms(folder: str, cwd: Path) -> list[Tokens]:
    """A folder word of a command (a pattern, as :attr:`Word.pattern`) as absolute
    bash patterns, named and resolved."""
    forms = pattern_forms(folder, cwd)
    for tokens in list(forms):
        if is_literal(tokens):
            text = pattern_text(tokens)
            if os.path.lexists(text):
                forms.append(literal(os.path.realpath(text)))
    return list(dict.fromkeys(forms))
