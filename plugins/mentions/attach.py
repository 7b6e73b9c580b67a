"""Finding the ``@path`` mentions of a prompt and turning each into context text.

Everything here is synchronous file work; the plugin runs it in a thread.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dsh.tools.files import read_regular_file
from dsh.tools.protected import refusal
from dsh_plugins._shared.images import format_size

MENTION = re.compile(r"(?:^|\s)@(\S+)")
RESOURCE = re.compile(r"[A-Za-z0-9_-]+:.")
"""``server:uri``: an MCP resource, not a path."""
TRAILING = ",.;:!?)]}>'\"`"
"""Punctuation a sentence may put right after a path: ``look at @a.py, then @b.py.``"""

SNIFF_BYTES = 8000
"""How much of a file's head decides whether it is text (a NUL there means binary)."""
MAX_SCANNED = 20_000
"""Folder entries looked at, at most, while listing a folder."""


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 256 * 1024
    max_total_bytes: int = 1024 * 1024
    max_entries: int = 200
    max_mentions: int = 20


@dataclass(frozen=True)
class Attachment:
    """One mention that was attached: a file's text or a folder's listing."""

    token: str
    path: str
    """Relative to the working directory, ``/``-separated (``.`` for the directory itself)."""
    kind: str
    """``file``, ``folder`` or ``image``."""
    text: str


@dataclass
class Attached:
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """One line for each mention that was not attached, saying why."""


def mentions(text: str) -> list[str]:
    """The ``@`` tokens of ``text`` in order, each once, as written (punctuation kept)."""
    seen: dict[str, None] = {}
    for match in MENTION.finditer(text):
        seen.setdefault(match.group(1), None)
    return list(seen)


def _candidates(token: str) -> list[str]:
    """The token as written, then shorter by each trailing punctuation mark in turn
    (``a.py),`` → ``a.py)`` → ``a.py``; ``.?`` → ``.``)."""
    found = [token]
    while len(found[-1]) > 1 and found[-1][-1] in TRAILING:
        found.append(found[-1][:-1])
    return found


def _looks_like_path(token: str) -> bool:
    """Whether a token that names nothing was meant as a path (``@src/x.py``) rather
    than a word (``@dataclass``, ``@alice``) or a server's resource (``@github:repo://x``,
    which the mcp plugin attaches): only paths get a "not found" note."""
    if RESOURCE.match(token):
        return False
    return any(c in token for c in "/.\\~")


def _display(path: Path, root: Path) -> str:
    relative = path.relative_to(root).as_posix()
    return relative or "."


def attach(
    text: str,
    cwd: Path,
    limits: Limits = Limits(),
    denied: Callable[[Path], bool] | None = None,
    images: Callable[[Path], bool] | None = None,
) -> Attached:
    """What the mentions in ``text`` attach, reading only inside ``cwd``; ``denied``
    says what the user's deny rules hide from every reading tool; ``images`` says which
    files are images to attach as such (kind ``image``, read later, no text)."""
    out = Attached()
    tokens = mentions(text)
    if not tokens:
        return out
    root = cwd.resolve()
    used = 0
    done: set[Path] = set()
    for number, token in enumerate(tokens):
        if number >= limits.max_mentions:
            rest = len(tokens) - number
            out.notes.append(
                f"{rest} more mention{'s' if rest != 1 else ''} left unread: "
                f"at most {limits.max_mentions} are attached from one prompt"
            )
            break
        written, full = _locate(token, root)
        if full is None:
            if _looks_like_path(written):
                out.notes.append(f"@{written}: no such file or folder in the working directory")
            continue
        try:
            real = full.resolve()
        except (OSError, RuntimeError):  # a symlink loop
            out.notes.append(f"@{written}: a link that cannot be followed, so not read")
            continue
        if not real.is_relative_to(root):
            out.notes.append(f"@{written}: outside the working directory, so not read")
            continue
        if not real.exists():  # a dangling link
            out.notes.append(f"@{written}: a link to nothing, so not read")
            continue
        # A person names the file, so a secret store is their call; dsh's own keys
        # are never sent to a model, whoever asks.
        refused = refusal(full, root)
        if refused is not None:
            out.notes.append(f"@{written}: not read: {refused.why}")
            continue
        if denied is not None and (denied(full) or denied(real)):
            out.notes.append(f"@{written}: not read: a deny rule in the settings hides it")
            continue
        if real in done:
            continue
        done.add(real)
        shown = _display(real, root)
        if real.is_dir():
            listing = folder_listing(real, root, limits.max_entries, denied)
            body_size = len(listing.encode(errors="surrogatepass"))  # odd file names
            if used + body_size > limits.max_total_bytes:
                out.notes.append(f"@{written}: left out, {_over_budget(used, limits)}")
                continue
            used += body_size
            out.attachments.append(Attachment(written, shown, "folder", listing))
            continue
        if images is not None and images(real):
            out.attachments.append(Attachment(written, shown, "image", ""))
            continue
        content, problem = read_text(real, limits.max_file_bytes)
        if content is None:
            out.notes.append(f"@{written}: {problem}")
            continue
        body_size = len(content.encode())
        if used + body_size > limits.max_total_bytes:
            out.notes.append(f"@{written}: left out, {_over_budget(used, limits)}")
            continue
        used += body_size
        out.attachments.append(Attachment(written, shown, "file", content))
    return out


def _over_budget(used: int, limits: Limits) -> str:
    return (
        f"the mentions of this prompt already attach {format_size(used)} "
        f"(at most {format_size(limits.max_total_bytes)} in all)"
    )


def _locate(token: str, root: Path) -> tuple[str, Path | None]:
    """(the token as meant, the path it names) — the path None when nothing is there."""
    candidates = _candidates(token)
    for candidate in candidates:
        path = Path(candidate).expanduser()
        full = path if path.is_absolute() else root / path
        try:
            if os.path.lexists(full):
                return candidate, full
        except (OSError, ValueError):  # a name too long, an embedded NUL
            continue
    return candidates[-1], None


def read_text(path: Path, max_bytes: int) -> tuple[str | None, str]:
    """(the file's text, "") or (None, why it is not attached)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        return None, f"cannot be read ({error.strerror or error})"
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None, "not a regular file, so not read"
        if status.st_size > max_bytes:
            return None, _too_big(status.st_size, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        return None, f"cannot be read ({error.strerror or error})"
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew since the stat
        return None, _too_big(len(data), max_bytes)
    if b"\x00" in data[:SNIFF_BYTES]:
        return None, f"a binary file ({format_size(len(data))}), not attached"
    return data.decode("utf-8", errors="replace"), ""


def _too_big(size: int, max_bytes: int) -> str:
    return (
        f"{format_size(size)}, over the {format_size(max_bytes)} limit for a mention, so not attached; "
        "read the parts that matter with the tools"
    )


def _repository_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():  # a file in worktrees and submodules
            return candidate
    return None


@dataclass(frozen=True)
class _Ignore:
    base: Path
    match: Callable[[str], bool]


MAX_GITIGNORE_BYTES = 1024 * 1024
"""A larger ``.gitignore`` is not read (it is not one a person wrote)."""


def _gitignore(folder: Path) -> _Ignore | None:
    try:
        data = read_regular_file(folder / ".gitignore", MAX_GITIGNORE_BYTES)
    except OSError:  # none, too large, or a pipe that would hang the thread
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return _Ignore(folder, spec.match_file)


def _ignored(path: Path, is_dir: bool, rules: list[_Ignore]) -> bool:
    for rule in rules:
        if path.is_relative_to(rule.base):
            relative = path.relative_to(rule.base).as_posix() + ("/" if is_dir else "")
            if rule.match(relative):
                return True
    return False


def folder_listing(
    folder: Path, root: Path, max_entries: int, denied: Callable[[Path], bool] | None = None
) -> str:
    """Entries of ``folder`` and below, breadth first, as paths relative to ``root``
    (folders end with ``/``), leaving out ``.git`` and what .gitignore files ignore."""
    # The .gitignore files above the folder, from the repository root (or the working
    # directory, outside a repository) down, apply to it too.
    top = _repository_root(folder) or root
    rules: list[_Ignore] = []
    for above in reversed([p for p in folder.parents if p.is_relative_to(top)]):
        rule = _gitignore(above)
        if rule is not None:
            rules.append(rule)
    found: list[str] = []
    more = False
    scanned = 0
    queue: deque[Path] = deque([folder])
    while queue and not more:
        current = queue.popleft()
        rule = _gitignore(current)
        if rule is not None:
            rules.append(rule)
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            scanned += 1
            if entry.name == ".git":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            path = Path(entry.path)
            if _ignored(path, is_dir, rules) or (denied is not None and denied(path)):
                continue
            if len(found) >= max_entries or scanned > MAX_SCANNED:
                more = True
                break
            found.append(_display(path, root) + ("/" if is_dir else ""))
            if is_dir:
                queue.append(path)
    lines = "\n".join(found) if found else "(empty)"
    if more:
        lines += f"\n… and more, left out: only the first {max_entries} entries are listed"
    return lines
