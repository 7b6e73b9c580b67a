"""Workspace trust: which project folders the user has said may configure dsh.

A cloned repository is untrusted input. Its ``.dsh/settings.toml`` (and later its
hooks, MCP servers, agents and commands) apply in full only once the user trusts the
project; until then they may only narrow what dsh does (see :mod:`dsh.narrowing`).
Trust belongs to a project root, the nearest folder holding ``.git`` (a folder, or
a worktree's file) owned by this user, else the working directory itself.

Decisions live in ``$DSH_HOME/trust.toml``, readable and writable by the user alone::

    [folders."/home/me/src/app"]
    trusted = true
    decided = "2026-12-03T14:02:11Z"

``trusted = false`` records "don't trust", so the question is not asked again. A
trust store that someone else could have written is refused, like a settings file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from dsh.paths import TRUST_FILE, private_lock, unsafe_to_obey
from dsh.settings_files import SettingsError, read_document, write_private

TrustState = Literal["trusted", "untrusted", "unknown"]
LOCK_FILE = ".trust.lock"


class TrustError(SettingsError):
    """The trust store cannot be used; the message names it. A settings error: dsh
    cannot know which configuration applies without it."""


def project_root(cwd: Path) -> Path:
    """The folder trust is decided for: the nearest git root at or above ``cwd``
    whose ``.git`` belongs to this user (as git's own ``safe.directory`` check, so a
    ``.git`` another user planted in ``/tmp`` makes no root), else ``cwd``."""
    here = cwd.resolve()
    uid = os.geteuid()
    for folder in (here, *here.parents):
        marker = folder / ".git"
        try:
            owner = marker.lstat().st_uid
        except OSError:
            continue
        if owner in (uid, 0):
            return folder
    return here


@dataclass(frozen=True)
class Decision:
    root: Path
    trusted: bool
    decided: str | None = None


class TrustStore:
    """``$DSH_HOME/trust.toml``: read afresh at every question (another dsh may have
    decided meanwhile), changed under a lock (two processes deciding at once keep
    both decisions)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    @property
    def path(self) -> Path:
        return self.home / TRUST_FILE

    def decisions(self) -> list[Decision]:
        path = self.path
        if not path.exists():
            return []
        problem = unsafe_to_obey(path)
        if problem is not None:
            raise TrustError(
                f"{path}: refused, {problem}; it decides which folders may configure dsh, "
                "so only you may write it"
            )
        data = read_document(path).values  # its SettingsError names the file
        folders = data.get("folders", {})
        if not isinstance(folders, dict):
            raise TrustError(f"{path}: folders must be a table of folder paths")
        found = []
        for name, entry in folders.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("trusted"), bool):
                raise TrustError(f"{path}: folders.{json.dumps(name)} needs trusted = true|false")
            decided = entry.get("decided")
            found.append(Decision(Path(name), entry["trusted"], decided if decided else None))
        return found

    def state(self, root: Path) -> TrustState:
        for decision in self.decisions():
            if decision.root == root:
                return "trusted" if decision.trusted else "untrusted"
        return "unknown"

    def decide(self, root: Path, trusted: bool) -> None:
        """Record the user's decision for ``root`` (replacing any earlier one)."""
        _encodable(root)
        with private_lock(self.home, LOCK_FILE):
            kept = [d for d in self.decisions() if d.root != root]
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._write([*kept, Decision(root, trusted, stamp)])

    def forget(self, root: Path) -> bool:
        """Drop any decision for ``root``; whether there was one."""
        with private_lock(self.home, LOCK_FILE):
            decisions = self.decisions()
            kept = [d for d in decisions if d.root != root]
            if len(kept) == len(decisions):
                return False
            self._write(kept)
            return True

    def _write(self, decisions: list[Decision]) -> None:
        lines = [
            "# Folders whose own dsh configuration you trust (true) or not (false).",
            "# Change with `dsh trust PATH` and `dsh untrust PATH`.",
        ]
        for decision in sorted(decisions, key=lambda d: str(d.root)):
            lines += ["", f"[folders.{toml_string(str(decision.root))}]"]
            lines.append(f"trusted = {'true' if decision.trusted else 'false'}")
            if decision.decided:
                lines.append(f"decided = {toml_string(decision.decided)}")
        write_private(self.path, "\n".join(lines) + "\n")


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters
    escaped, everything else as it is."""
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else "\\" + c if c in '"\\' else c
        for c in text
    )
    return f'"{escaped}"'


def _encodable(root: Path) -> None:
    try:
        str(root).encode("utf-8")
    except UnicodeEncodeError:
        raise TrustError(
            f"{root!r}: a folder whose name is not valid UTF-8 cannot be recorded as trusted"
        ) from None
