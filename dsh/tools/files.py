"""The files a tool is given by path: where a path the model wrote points, and how to
show it back.

A model names files relative to the working directory, absolutely, or from ``~``. A
tool resolves the name once (:func:`resolve`) and then has both forms the permission
policy checks (the path as named, and with symlinks followed) and the form to show in
its messages (relative to the working directory when inside it).

Resolving follows symlinks, so it touches the disk: tools call it through
``asyncio.to_thread``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Target:
    """A path a tool was given, resolved against the working directory."""

    display: str
    """How to show it: relative to the working directory when inside it, else absolute."""
    path: Path
    """Absolute, symlinks not followed: what the model named."""
    real: Path
    """Symlinks followed: the file actually read or replaced, and the key for
    observations and locks."""

    @property
    def key(self) -> str:
        return str(self.real)

    @property
    def redirected(self) -> bool:
        """Whether a symlink makes the path name a different file."""
        return self.real != self.path


def resolve(file_path: str, cwd: Path) -> Target:
    """``file_path`` (absolute, relative to ``cwd``, or ``~``-based) as a target. Blocking."""
    raw = os.path.expanduser(file_path) if file_path.startswith("~") else file_path
    path = Path(os.path.normpath(os.path.join(cwd, raw)))
    return Target(display=display_path(path, cwd), path=path, real=Path(os.path.realpath(path)))


def display_path(path: Path, cwd: Path) -> str:
    """Relative to ``cwd`` when inside it (as written, or with symlinks followed), else absolute."""
    for base in (cwd, Path(os.path.realpath(cwd))):
        try:
            relative = path.relative_to(base)
        except ValueError:
            continue
        return relative.as_posix() or "."
    return str(path)
