"""Folders of Markdown definitions: ``NAME.md`` files with a front matter, read in
order of precedence.

Custom commands and agent profiles are such folders. Each keeps its own rules: which
folders, weakest first; how a file's name and fields make the definition's name; what
its fields must hold. This module reads them the one way: :func:`markdown_files`
lists a folder's files (hidden ones and symlinked folders left out),
:func:`read_definition` reads one file's front matter and body within a size bound,
and :func:`scan` loads every folder's files, a later folder's definition replacing an
earlier one's of the same name, each file left out said with why (:class:`Skipped`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from dsh.tools.files import FileTooLarge, read_regular_file
from dsh_plugins._shared.frontmatter import FrontMatterError, split_front_matter


@dataclass(frozen=True)
class Skipped:
    """A file left out, and why (shown where the definitions are listed)."""

    path: Path
    reason: str


class Named(Protocol):
    @property
    def name(self) -> str: ...


Definition = TypeVar("Definition", bound=Named)


def markdown_files(root: Path, *, max_depth: int = 0) -> Iterator[tuple[Path, list[str]]]:
    """Each ``.md`` file under ``root``, in name order, with the names its place gives
    it: the folders under ``root``, then the file's stem. Folders are entered
    ``max_depth`` deep (none by default); hidden entries and symlinked folders are
    left out; a folder that cannot be read has none."""
    yield from _markdown_files(root, (), max_depth)


def _markdown_files(
    root: Path, parts: tuple[str, ...], max_depth: int
) -> Iterator[tuple[Path, list[str]]]:
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            if len(parts) < max_depth:
                yield from _markdown_files(Path(entry.path), (*parts, entry.name), max_depth)
        elif entry.name.endswith(".md") and entry.is_file():
            yield Path(entry.path), [*parts, entry.name[: -len(".md")]]


def read_definition(path: Path, max_bytes: int) -> tuple[dict[str, str], str] | Skipped:
    """The file's front-matter fields and body; or why it is left out (larger than
    ``max_bytes``, unreadable, not UTF-8, a front matter that cannot be read)."""
    try:
        text = read_regular_file(path, max_bytes).decode("utf-8")
    except FileTooLarge:
        return Skipped(path, f"larger than {max_bytes // 1024} KB")
    except (OSError, UnicodeDecodeError) as error:
        return Skipped(path, f"cannot be read ({error})")
    try:
        return split_front_matter(text)
    except FrontMatterError as error:
        return Skipped(path, str(error))


def scan(
    roots: Iterable[tuple[str, Path]],
    load: Callable[[Path, list[str], str], Definition | Skipped],
    *,
    max_depth: int = 0,
) -> tuple[dict[str, Definition], list[Skipped]]:
    """Every definition of the ``(origin, folder)`` pairs, weakest first, by name (a
    later folder's replacing an earlier one's of the same name); and the files left
    out, with why."""
    found: dict[str, Definition] = {}
    skipped: list[Skipped] = []
    for origin, root in roots:
        for path, parts in markdown_files(root, max_depth=max_depth):
            loaded = load(path, parts, origin)
            if isinstance(loaded, Skipped):
                skipped.append(loaded)
            else:
                found[loaded.name] = loaded
    return found, skipped
