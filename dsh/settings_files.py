"""Settings files on disk: reading one, with errors that name the file, and writing one
whole, readable by its owner only. Beneath :mod:`dsh.settings` (which re-exports it
all) and :mod:`dsh.trust` (whose store is such a file, and which settings consult)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh.regular_files import read_regular_file


class SettingsError(ValueError):
    """A settings document cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Document:
    path: Path
    values: dict[str, Any]


def read_document(path: Path) -> Document:
    try:
        # Never a plain open: a project's settings file that is a named pipe would
        # hang start-up waiting for a writer.
        values = tomllib.loads(read_regular_file(path).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SettingsError(f"{path}: not valid TOML: {error}") from None
    except OSError as error:
        raise SettingsError(f"{path}: cannot be read: {error.strerror}") from None
    return Document(path, values)


def write_private(path: Path, text: str) -> None:
    """Replace a settings document whole (a temporary file renamed over it), readable
    by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
