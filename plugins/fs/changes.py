"""Text changes, computed in memory: decoding for editing, line endings, exact-string
replacement, and the unified diff shown for approval and in the UI."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from dsh.tools import ToolError
from dsh.tools.files import Target
from dsh_plugins._shared.files import format_size, not_text, sniff
from dsh_plugins.fs.arguments import EditItem

BOM = "\ufeff"
NEWLINE_SAMPLE = 4096
DIFF_CONTEXT = 3


@dataclass(frozen=True)
class Text:
    """A file's text as edits see it: LF line endings, no byte-order mark; and how to
    put those back."""

    body: str
    newline: str
    bom: bool

    def encode(self, body: str) -> bytes:
        if self.newline != "\n":
            body = body.replace("\n", self.newline)
        return ((BOM if self.bom else "") + body).encode("utf-8")


def dominant_newline(data: bytes) -> str:
    sample = data[:NEWLINE_SAMPLE]
    crlf = sample.count(b"\r\n")
    return "\r\n" if crlf > sample.count(b"\n") - crlf else "\n"


def decode_for_edit(data: bytes, target: Target) -> Text:
    """The text of a file about to be edited; refuses binary and non-UTF-8 files, since
    writing them back through a lossy decoding would corrupt them."""
    kind = sniff(data)
    if kind is not None:
        raise not_text(target, kind, len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(
            f"{target.display} is not valid UTF-8 (byte {error.start}), so it cannot be "
            "edited without corrupting it. Rewrite it whole with write, after reading it, "
            "or convert it to UTF-8 first.",
            "FS_NOT_TEXT",
        ) from error
    bom = text.startswith(BOM)
    body = text.removeprefix(BOM).replace("\r\n", "\n")
    return Text(body=body, newline=dominant_newline(data), bom=bom)


def too_large(target: Target, size: int, limit: int) -> ToolError:
    return ToolError(
        f"{target.display} is {format_size(size)}, more than the {format_size(limit)} that "
        "edit handles in memory; change it with a shell command instead.",
        "FS_TOO_LARGE",
    )


_LINE_PREFIX = re.compile(r"^\s*\d+: ", re.M)


def apply_edits(body: str, edits: list[EditItem], target: Target) -> tuple[str, int]:
    """``body`` with every edit applied in order, and how many replacements were made.
    Raises on the first edit that does not apply, naming it when there are several."""
    replaced = 0
    for number, edit in enumerate(edits, 1):
        where = f"edit {number} of {len(edits)}: " if len(edits) > 1 else ""
        old = edit.old_string.replace("\r\n", "\n")
        new = edit.new_string.replace("\r\n", "\n")
        count = body.count(old)
        if count == 0:
            raise ToolError(
                f"{where}old_string was not found in {target.display}. "
                f"{_near_miss(body, old)}Nothing was changed.",
                "FS_EDIT_NOT_FOUND",
            )
        if count > 1 and not edit.replace_all:
            raise ToolError(
                f"{where}old_string occurs {count} times in {target.display}. Include more "
                "surrounding lines to make it unique, or set replace_all to true to change "
                "every occurrence. Nothing was changed.",
                "FS_AMBIGUOUS_EDIT",
            )
        body = body.replace(old, new) if edit.replace_all else body.replace(old, new, 1)
        replaced += count if edit.replace_all else 1
    return body, replaced


def _near_miss(body: str, old: str) -> str:
    """A hint at the usual reasons an exact match fails."""
    lines = old.split("\n")
    if all(_LINE_PREFIX.match(line) for line in lines if line.strip()):
        return (
            "It seems to include the `n: ` line-number prefixes that read shows; leave them out. "
        )

    def squeeze(text: str) -> str:
        return "\n".join(" ".join(line.split()) for line in text.split("\n"))

    if squeeze(old).strip() and squeeze(old).strip() in squeeze(body):
        return (
            "Text like it exists but its whitespace or indentation differs; read the "
            "file again and copy the lines exactly. "
        )
    return "It must match the file exactly; read the file again and copy the text. "


@dataclass(frozen=True)
class Diff:
    text: str
    added: int
    removed: int

    @property
    def stats(self) -> str:
        return f"+{self.added} -{self.removed}"


def unified_diff(before: str | None, after: str, display: str) -> Diff:
    """The change from ``before`` (None: no file) to ``after``, as ``diff -u`` shows it."""
    old_lines = _diff_lines(before or "")
    new_lines = _diff_lines(after)
    rows = list(
        difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile="/dev/null" if before is None else f"a/{display}",
            tofile=f"b/{display}",
            n=DIFF_CONTEXT,
        )
    )
    added = sum(1 for row in rows if row.startswith("+") and not row.startswith("+++"))
    removed = sum(1 for row in rows if row.startswith("-") and not row.startswith("---"))
    return Diff("".join(rows), added, removed)


def _diff_lines(text: str) -> list[str]:
    # Only LF ends a line here; splitlines would also split at form feeds and the like.
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    if lines and not lines[-1].endswith("\n"):
        # As diff -u shows it, so a change to the final newline is visible.
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
