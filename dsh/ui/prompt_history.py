"""The prompts typed in a project, remembered across runs.

One file per project under ``$DSH_HOME/history/`` (0600 in a 0700 folder), in
prompt-toolkit's ``FileHistory`` format, so plain mode and the TUI share it::

    # 2026-12-03 10:00:00.000000
    +first line
    +second line

This module reads and appends that format itself: the TUI gets its history
without importing prompt-toolkit.
"""

from __future__ import annotations

import datetime
import hashlib
import os
from pathlib import Path

from dsh.paths import private_dir

MAX_ENTRIES = 1000


def history_path(home: Path, cwd: Path) -> Path:
    """Each project keeps its own prompt history."""
    digest = hashlib.sha256(str(cwd).encode()).hexdigest()[:16]
    return private_dir(home / "history") / f"{digest}.plain"


def read_history(path: Path, limit: int = MAX_ENTRIES) -> list[str]:
    """The prompts in ``path``, oldest first (the newest ``limit`` of them)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    entries: list[str] = []
    lines: list[str] = []
    for line in raw.decode("utf-8", errors="replace").split("\n"):
        if line.startswith("+"):
            lines.append(line[1:])
        elif lines:
            entries.append("\n".join(lines))
            lines = []
    if lines:
        entries.append("\n".join(lines))
    return entries[-limit:]


def append_history(path: Path, prompt: str) -> None:
    """Add ``prompt`` to the file (created 0600). Failing to write loses only this
    history line, never the prompt, so errors are swallowed."""
    stamp = datetime.datetime.now().isoformat(sep=" ")
    body = "".join(f"+{line}\n" for line in prompt.split("\n"))
    data = f"\n# {stamp}\n{body}".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)


class PromptHistory:
    """Up and Down through earlier prompts, the draft kept while browsing."""

    def __init__(self, entries: list[str] | None = None, path: Path | None = None) -> None:
        self.entries = entries or []
        self.path = path
        self._index: int | None = None
        self._draft = ""

    def load(self, path: Path) -> None:
        self.path = path
        self.entries = read_history(path) + self.entries

    def add(self, prompt: str) -> None:
        self._index = None
        if not prompt.strip() or (self.entries and self.entries[-1] == prompt):
            return
        self.entries.append(prompt)
        if self.path is not None:
            append_history(self.path, prompt)

    @property
    def browsing(self) -> bool:
        return self._index is not None

    def previous(self, current: str) -> str | None:
        """The prompt before the one shown (the newest first); None at the oldest."""
        if not self.entries:
            return None
        if self._index is None:
            self._draft = current
            self._index = len(self.entries)
        if self._index == 0:
            return None
        self._index -= 1
        return self.entries[self._index]

    def next(self) -> str | None:
        """The prompt after the one shown; the draft after the newest; None when not
        browsing."""
        if self._index is None:
            return None
        self._index += 1
        if self._index >= len(self.entries):
            self._index = None
            return self._draft
        return self.entries[self._index]

    def reset(self) -> None:
        self._index = None
