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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dsh.paths import (
    PROJECT_DIR,
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
from dsh.policy.protected_paths import GIT_MAKES as GIT_MAKES
from dsh.policy.protected_paths import (
    GIT_MARKERS,
    absolute_path,
    dsh_home_folders,
    folder_spellings,
    git_dir_why,
    home_folders,
    path_spellings,
    refused_why,
    relative_under,
    secret_store_why,
    write_why,
)
from dsh.policy.protected_paths import GIT_SHAPED as GIT_SHAPED
from dsh.policy.protected_paths import SecretFilter as SecretFilter
from dsh.policy.protected_paths import read_protection as read_protection
from dsh.policy.protected_paths import refusal as refusal
from dsh.policy.protected_paths import refused_paths as refused_paths
from dsh.policy.protected_paths import shown as shown
from dsh.policy.protected_paths import write_protection as write_protection

# The tables and the checks of one path are modules of their own; their names are
# still this module's, where plugins and tests find them.
from dsh.policy.protected_tables import DSH_HOME_WHY as DSH_HOME_WHY
from dsh.policy.protected_tables import DSH_SETTINGS as DSH_SETTINGS
from dsh.policy.protected_tables import (
    ENVIRON_TEXT,
    NEVER,
    PROC_COMPUTED_TEXT,
    PROC_OWN_TEXT,
    PROC_SAMPLES,
    PROC_TEXT,
)
from dsh.policy.protected_tables import GIT_DATA as GIT_DATA
from dsh.policy.protected_tables import GIT_RUNS as GIT_RUNS
from dsh.policy.protected_tables import HOME_WRITES as HOME_WRITES
from dsh.policy.protected_tables import PROC as PROC
from dsh.policy.protected_tables import PROC_ENVIRON as PROC_ENVIRON
from dsh.policy.protected_tables import PROC_OWN as PROC_OWN
from dsh.policy.protected_tables import PROC_UNKNOWN as PROC_UNKNOWN
from dsh.policy.protected_tables import REFUSED_FILES as REFUSED_FILES
from dsh.policy.protected_tables import SEARCH_NOTE as SEARCH_NOTE
from dsh.policy.protected_tables import SECRET_STORES as SECRET_STORES
from dsh.policy.protected_tables import SHELL_STARTUP as SHELL_STARTUP
from dsh.policy.protected_tables import SITE_FOLDER as SITE_FOLDER
from dsh.policy.protected_tables import SITE_FOLDERS as SITE_FOLDERS
from dsh.policy.protected_tables import SITE_STARTS as SITE_STARTS
from dsh.policy.protected_tables import STARTUP_WRITES as STARTUP_WRITES
from dsh.policy.protected_tables import Protection as Protection
from dsh.policy.readers import recursive_reads
from dsh.policy.shell import analyse

# ---------------------------------------------------------------------- commands

_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_GLOB = frozenset("*?[")


def _expand(word: str, cwd: Path) -> Path | None:
    """A command's static word as a path: ``~``, ``$HOME`` and ``$DSH_HOME`` expanded,
    relative to ``cwd``; None when it holds any other variable."""
    if "$" not in word:
        return absolute_path(word, cwd) if word and "\x00" not in word else None
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
    return absolute_path(text, cwd)


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
    homes = [str(h) for h in home_folders()]
    for path in refused_paths():
        if path.name not in text:
            continue  # every spelling ends with the file's name
        spellings = [re.escape(str(path))]
        for home in homes:
            relative = relative_under(path, Path(home))
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
    if not any(PROC_TEXT.search(t) for t in texts) and not any(_GLOB & set(w) for w in words):
        return []
    found: list[Protection] = []
    where = PROC / "<pid>"
    if any(PROC_OWN_TEXT.search(text) for text in texts):
        found.append(Protection(where, f"names /proc: {PROC_OWN}", True, PROC_OWN))
    elif any(PROC_TEXT.search(t) and ENVIRON_TEXT.search(t) for t in texts):
        why = PROC_ENVIRON
        found.append(Protection(where, f"names /proc: {why}", True, why))
    elif PROC_COMPUTED_TEXT.search(command):
        found.append(Protection(where, f"names /proc: {PROC_UNKNOWN}", True, PROC_UNKNOWN))
    for word in words:
        for candidate in _candidates(word):
            if _GLOB & set(candidate):
                path = _expand(candidate, cwd)
                if path is not None and any(_glob_matches(path, s) for s in PROC_SAMPLES):
                    why = PROC_ENVIRON
                    found.append(
                        Protection(path, f"names {candidate}: {why}", refused=True, why=why)
                    )
            elif "$" in candidate and PROC_TEXT.search(candidate):
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
        roots = [os.fspath(home) for home in dsh_home_folders()]
        for home in home_folders():
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
        if os.path.basename(word.rstrip("/")) in GIT_MARKERS:
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
        return self._plain_folder(os.path.dirname(text)) and git_dir_why(Path(text)) is None

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
    for form in path_spellings(path, Path("/")):
        why = write_why(form)
        if why is not None:
            return why
    return None


def _refused_name(path: Path, cwd: Path) -> Protection:
    why = refused_why(path) or NEVER
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
    return _covered_in(home_folders(), dsh_home_folders())


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
        for base in folder_spellings(os.fspath(cwd)):
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
    for form in path_spellings(path, Path("/")):
        why = secret_store_why(form)
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
            paths = path_spellings(named, cwd) if os.path.lexists(named) else (named,)
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
