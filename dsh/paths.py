"""Where dsh keeps its files: ``$DSH_HOME`` (default ``~/.dsh``), private to the user."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

# Files in $DSH_HOME that hold powers: no tool reads or writes them, whatever the mode.
CREDENTIALS_FILE = "credentials.json"
"""Stored keys (:mod:`dsh.credentials`)."""
TRUST_FILE = "trust.toml"
"""The folders the user trusts (:mod:`dsh.trust`)."""
INSTALLATION_KEY_FILE = "installation.key"
"""The per-installation secret that signs session grants (:mod:`dsh.policy.grants`)."""
HOME_ENV_FILE = ".env"
"""Keys in ``$DSH_HOME/.env`` (:mod:`dsh.credentials`)."""

# Where a project and the user keep dsh's configuration: read by the settings, guarded
# by the policy (:mod:`dsh.policy.protected`), so named here, beneath both.
PROJECT_DIR = ".dsh"
"""A project's own folder: ``.dsh/settings.toml``, never written by a tool unasked."""
USER_FILE = "settings.toml"
"""The settings document, in ``$DSH_HOME`` and in a project's ``.dsh``."""
ENV_FILE = ".env"
"""A project's keys for the credential store, read only when the project is trusted."""


def dsh_home() -> Path:
    configured = os.environ.get("DSH_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".dsh"


def private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents, each readable by the user alone.
    (``mkdir(parents=True)`` would give the parents the umask's mode instead.)"""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
            folder.chmod(PRIVATE_DIR)  # whatever the umask took away
        except FileExistsError:
            pass  # made concurrently; the final folder's mode is checked below
    if path.stat().st_mode & 0o777 != PRIVATE_DIR:
        path.chmod(PRIVATE_DIR)
    return path


@contextmanager
def private_lock(folder: Path, name: str) -> Iterator[None]:
    """An exclusive lock on ``folder/name`` (made private, with the folder), held for
    a read-modify-write of a file there: two dsh processes changing it at once must
    not lose one of the changes. Closing the file releases it."""
    private_dir(folder)
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_ESCAPED = re.compile(r"~([0-9a-f]{6})")
_SEPARATORS = re.compile(r"[\\/]+")
MAX_SEGMENT = 251


def escape_segment(text: str) -> str:
    """A file-name segment that maps back to ``text`` one to one: every character but
    ASCII letters, digits, ``_`` and ``-`` becomes ``~`` and six hex digits, so no
    segment can be ``.``, ``..`` or hold a separator."""
    return _UNSAFE.sub(lambda m: f"~{ord(m.group()):06x}", text)


def unescape_segment(segment: str) -> str:
    """The text :func:`escape_segment` made ``segment`` from."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), segment)


def project_key(cwd: str | None) -> str:
    """The directory name grouping one working directory's sessions."""
    if not cwd:
        return "_no-cwd"
    key = escape_segment(_SEPARATORS.sub("-", cwd).replace("~", "-"))
    if len(key) > MAX_SEGMENT - 4:
        digest = hashlib.sha256(cwd.encode()).hexdigest()[:16]
        key = key[: MAX_SEGMENT - 4 - 17] + "_" + digest
    return f"--{key}--"


def unsafe_to_obey(path: Path) -> str | None:
    """Why a file that configures dsh must not be obeyed, or None when it may be: it
    (or the folder holding it) is writable by other users, or owned by someone other
    than this user or root. Anyone able to write it could otherwise grant themselves
    what its owner can do, as ssh's StrictModes reasons. Symlinks are followed: what
    counts is the file that will be read."""
    uid = os.geteuid()
    real = path.resolve()
    for target, what in ((real, "it"), (real.parent, f"its folder {real.parent}")):
        try:
            status = target.stat()
        except OSError:
            continue  # a missing file has nothing to obey; reading it reports the rest
        if status.st_uid not in (uid, 0):
            return f"{what} is owned by another user (uid {status.st_uid})"
        if status.st_mode & 0o022 and not (target is real.parent and status.st_mode & 0o1000):
            mode = status.st_mode & 0o777
            return f"{what} can be written by other users (mode {mode:04o}; chmod go-w {target})"
    return None
