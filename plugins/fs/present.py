"""How the file tools look in a UI, from a call's arguments and its logged result."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dsh.tools import CallResult, DiffView, FileDiff, Presentation, TextView

NUMBERED_LINE = re.compile(r"^(\d+): ?(.*)$")


def _meta(result: CallResult) -> dict[str, Any]:
    return result.meta if isinstance(result.meta, dict) else {}


def _failed(title: str, result: CallResult) -> TextView | None:
    return TextView(title=title, body=result.text) if result.is_error else None


def read_call(arguments: dict[str, Any]) -> Presentation:
    return TextView(title=f"Read {arguments.get('file_path', '?')}")


def read_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
    path = arguments.get("file_path", "?")
    failed = _failed(f"Read {path}", result)
    if failed is not None:
        return failed
    meta = _meta(result)
    if isinstance(meta.get("image"), str):
        return TextView(title=f"Read {meta.get('path', path)} {meta['image']}")
    first, count, total = meta.get("offset", 1), meta.get("lines", 0), meta.get("total_lines")
    span = f"lines {first}-{first + count - 1}" if count else "no lines"
    title = f"Read {meta.get('path', path)} ({span}" + (f" of {total})" if total else ")")
    rows = [m.group(2) for line in result.text.splitlines() if (m := NUMBERED_LINE.match(line))]
    return TextView(title=title, body="\n".join(rows) or None, language=meta.get("lang"))


def change_presenters(
    verb: str,
) -> tuple[
    Callable[[dict[str, Any]], Presentation], Callable[[dict[str, Any], CallResult], Presentation]
]:
    """The call and result views of a tool that changes a file: ``Edit app.py`` or
    ``Write notes.txt`` (``Create`` for a new file), then the diff, whose own line
    carries the counts (the title does only when there is no diff to show)."""

    def call(arguments: dict[str, Any]) -> Presentation:
        return TextView(title=f"{verb} {arguments.get('file_path', '?')}")

    def result(arguments: dict[str, Any], result: CallResult) -> Presentation:
        path = arguments.get("file_path", "?")
        failed = _failed(f"{verb} {path}", result)
        if failed is not None:
            return failed
        meta = _meta(result)
        shown = str(meta.get("path", path))
        added, removed = int(meta.get("added", 0)), int(meta.get("removed", 0))
        title = f"{'Create' if meta.get('created') else verb} {shown}"
        diff = str(meta.get("diff") or "")
        if not diff:
            return DiffView(title=f"{title} (+{added} -{removed})")
        return DiffView(
            title=title, files=(FileDiff(path=shown, diff=diff, added=added, removed=removed),)
        )

    return call, result


def glob_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
    pattern = arguments.get("pattern", "?")
    failed = _failed(f"Glob {pattern}", result)
    if failed is not None:
        return failed
    meta = _meta(result)
    files = [str(f) for f in meta.get("files", [])]
    total = meta.get("total", len(files))
    return TextView(title=f"Glob {pattern}: {total} files", body="\n".join(files) or None)


def grep_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
    pattern = arguments.get("pattern", "?")
    failed = _failed(f"Grep {pattern}", result)
    if failed is not None:
        return failed
    meta = _meta(result)
    total, files = meta.get("total", 0), meta.get("files", 0)
    return TextView(title=f"Grep {pattern}: {total} matches in {files} files", body=result.text)


def search_call(name: str) -> Any:
    def present(arguments: dict[str, Any]) -> Presentation:
        where = arguments.get("path") or "."
        return TextView(title=f"{name.capitalize()} {arguments.get('pattern', '?')} in {where}")

    return present
