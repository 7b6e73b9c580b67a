"""Saving each proposed plan to a Markdown file: ``[plugins.plan] directory``.

A plan is written to ``<directory>/<YYYY-MM-DD-HHMMSS>-<slug>.md`` (the slug from its
first heading, else its first line), created exclusively: a file already there is
never overwritten, the name gets ``-2``, ``-3``... instead. ``~`` is the user's home;
a relative folder is taken from the project root. Like every ``[plugins.*]`` key, an
untrusted project's settings cannot set it (docs/settings.md). A plan that cannot be
written is still in the session log (``plan/proposed``); the model is told why.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

SLUG_CHARACTERS = 48
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    directory: str | None = None
    """Where each proposed plan is saved as a Markdown file; unset: not saved."""


@dataclass(frozen=True)
class Saved:
    path: str | None = None
    """The file written, None when none was."""
    said: str | None = None
    """What the model is told about it (None: saving is off)."""


def slug(plan: str) -> str:
    """A file name's words for ``plan``: its first heading, else its first line."""
    lines = [line for line in plan.splitlines() if line.strip()]
    headings = [m.group(1) for line in lines if (m := _HEADING.match(line))]
    title = headings[0] if headings else (lines[0] if lines else "")
    words = _NOT_SLUG.sub("-", title.lower()).strip("-")
    return words[:SLUG_CHARACTERS].rstrip("-") or "plan"


def write_plan(plan: str, folder: Path, now: datetime) -> Path:
    """Write ``plan`` to a new file in ``folder`` (made if missing) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{now:%Y-%m-%d-%H%M%S}-{slug(plan)}"
    text = plan if plan.endswith("\n") else plan + "\n"
    number = 1
    while True:
        path = folder / (f"{stem}.md" if number == 1 else f"{stem}-{number}.md")
        try:
            # O_EXCL: never another file's bytes replaced, nor a link followed.
            descriptor = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
            )
        except FileExistsError:
            number += 1
            continue
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        return path


class Saving:
    """Where plans go: the configured folder, resolved against the project root."""

    def __init__(self, directory: str | None, root: Path | None) -> None:
        self.directory = directory
        self.root = root

    def folder(self, cwd: Path) -> Path | None:
        if not self.directory:
            return None
        folder = Path(self.directory).expanduser()
        return folder if folder.is_absolute() else (self.root or cwd) / folder

    async def save(self, plan: str, cwd: Path) -> Saved:
        folder = self.folder(cwd)
        if folder is None:
            return Saved()
        try:
            path = await asyncio.to_thread(write_plan, plan, folder, datetime.now())
        except OSError as error:
            reason = error.strerror or str(error)
            return Saved(
                said=f"The plan could not be saved to {folder}: {reason} (it is kept in the "
                "session log)."
            )
        return Saved(path=str(path), said=f"The plan was saved to {path}.")
