"""Protected paths and secret files, for one path: whether a tool may read or write
it (:func:`refusal`, :func:`read_protection`, :func:`write_protection`), and what a
search leaves out (:class:`SecretFilter`); the tables are
:mod:`dsh.policy.protected_tables`, commands :mod:`dsh.policy.protected`."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from dsh.paths import (
    PROJECT_DIR,
    dsh_home,
)
from dsh.policy.protected_tables import (
    DSH_HOME_WHY,
    DSH_SETTINGS,
    GIT_DATA,
    GIT_RUNS,
    HOME_WRITES,
    NEVER,
    PROC,
    PROC_ENVIRON,
    PROC_OWN,
    PROC_SELF,
    REFUSED_FILES,
    SEARCH_NOTE,
    SECRET_STORES,
    Protection,
    site_startup,
)


def absolute_path(path: Path | str, cwd: Path) -> Path:
    text = os.fspath(path)
    if text.startswith("~"):
        text = os.path.expanduser(text)
    return Path(os.path.normpath(os.path.join(cwd, text)))


def path_spellings(path: Path | str, cwd: Path) -> tuple[Path, ...]:
    """The path as named (absolute) and with symlinks followed, each once."""
    named = absolute_path(path, cwd)
    real = Path(os.path.realpath(named))
    return (named,) if real == named else (named, real)


def relative_under(path: Path, base: Path) -> PurePosixPath | None:
    """``path`` relative to ``base`` (``.`` for itself), or None when outside."""
    try:
        return PurePosixPath(path.relative_to(base).as_posix())
    except ValueError:
        return None


def home_folders() -> tuple[Path, ...]:
    return folder_spellings(os.path.expanduser("~"))


def dsh_home_folders() -> tuple[Path, ...]:
    return folder_spellings(os.fspath(dsh_home()))


@functools.lru_cache(maxsize=16)
def folder_spellings(folder: str) -> tuple[Path, ...]:
    # Asked for every word of every command: the home folders, looked up once each.
    return path_spellings(folder, Path("/"))


def shown(path: Path, cwd: Path) -> str:
    """``path`` as the user would write it: relative inside ``cwd``, ``~/...`` in the
    home folder, else absolute."""
    for base in path_spellings(cwd, Path("/")):
        relative = relative_under(path, base)
        if relative is not None and str(relative) != ".":
            return str(relative)
    for home in home_folders():
        relative = relative_under(path, home)
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


def refused_why(path: Path) -> str | None:
    for home in dsh_home_folders():
        relative = relative_under(path, home)
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
    if named and (parts[2] in PROC_SELF or parts[2] == str(os.getpid())):
        return PROC_OWN
    if "environ" in parts[3:]:
        return PROC_ENVIRON
    return None


def refused_paths() -> list[Path]:
    """Every form (named, real) of every refused file, whether it exists or not."""
    return [home / name for home in dsh_home_folders() for name in REFUSED_FILES]


def write_why(path: Path) -> str | None:
    parts = path.parts
    if ".git" in parts:
        rest = parts[len(parts) - parts[::-1].index(".git") :]
        # The folder itself, a worktree's .git file (it says where git's data is),
        # config, hooks: each decides what git runs.
        if not rest or rest[-1] == "config" or "hooks" in rest or rest[0] == "info":
            return GIT_RUNS
        return GIT_DATA
    if (why := git_dir_why(path)) is not None:
        return why
    if any(relative_under(path, home) is not None for home in dsh_home_folders()):
        return DSH_HOME_WHY
    if PROJECT_DIR in parts:
        return DSH_SETTINGS
    return site_startup(path) or _in_home(path, HOME_WRITES)


GIT_SHAPED = "a folder git takes for a repository: its files can make git run programs"
GIT_MAKES = "this file can make a folder a git repository, whose config can make git run programs"
GIT_MARKERS = frozenset({"HEAD", "commondir"})
"""A git directory is a folder with a ``HEAD`` beside ``objects/`` and ``refs/`` (or a
``commondir`` naming where those are)."""


def git_dir_why(path: Path) -> str | None:
    """Why ``path`` is git's data though no ``.git`` names it: it is in a folder git
    would take for a repository (a bare one a project ships), or it is the file that
    would make its folder one. Protected like ``.git/``, so that no write plants a
    repository whose config the user's own git obeys later."""
    if path.name in GIT_MARKERS:
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


def secret_store_why(path: Path) -> str | None:
    return _in_home(path, SECRET_STORES)


def _in_home(path: Path, table: dict[str, str]) -> str | None:
    """Why ``path`` is in ``table`` (entries relative to the home folder), if it is."""
    for home in home_folders():
        relative = relative_under(path, home)
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
    forms = path_spellings(path, cwd)
    for form in forms:
        why = refused_why(form) or _proc_why(form, named=form is forms[0])
        if why is not None:
            return Protection(form, f"{verb} {shown(form, cwd)}: {why}", refused=True, why=why)
    same = _same_file(forms[-1])
    if same is not None:
        why = refused_why(same) or NEVER
        said = f"{verb} {shown(forms[0], cwd)}, which is {shown(same, cwd)}: {why}"
        return Protection(forms[0], said, refused=True, why=why)
    return None


def write_protection(path: Path | str, cwd: Path) -> Protection | None:
    """Why writing ``path`` must be asked every time (or is refused outright), or None
    for an ordinary path. Relative paths are taken from ``cwd``."""
    return _protection(path, cwd, "writes", write_why)


def read_protection(path: Path | str, cwd: Path) -> Protection | None:
    """Why reading ``path`` (a file, or a folder to search) is refused or must be asked
    first, or None."""
    return _protection(path, cwd, "reads", secret_store_why)


def _protection(
    path: Path | str, cwd: Path, verb: str, why_of: Callable[[Path], str | None]
) -> Protection | None:
    refused = refusal(path, cwd, verb)
    if refused is not None:
        return refused
    for form in path_spellings(path, cwd):
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
        roots = path_spellings(root, Path("/")) if root is not None else ()
        for home in home_folders():
            for entry in SECRET_STORES:
                store = home / entry.rstrip("/")
                if not any(relative_under(r, store) is not None for r in roots):
                    stores.append(store)
        self._stores = stores
        self._anywhere = root is None or any(
            relative_under(secret, r) is not None
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
                or any(relative_under(form, s) is not None for s in self._stores)
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
