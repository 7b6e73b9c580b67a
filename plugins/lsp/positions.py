"""Positions: the tool speaks 1-based lines and 1-based characters counted in code
points (what ``read`` shows); the wire speaks 0-based lines and, by the spec, UTF-16
code units (the only encoding every server must support, and the one we offer at
``initialize``). Some servers count otherwise: one may announce ``utf-8`` or
``utf-32`` (code points), and some count code points without saying so (pylsp), so
the encoding is chosen per server and every column crossing the wire is converted
against its line's text with it.

A character outside the Basic Multilingual Plane (``😀``) is one code point but two
UTF-16 units (and four UTF-8 bytes).
Lines are split as LSP splits them: at ``\\n``, ``\\r\\n`` and ``\\r`` only (not at
the other separators ``str.splitlines`` knows).
"""

from __future__ import annotations

import re
from typing import Literal

Encoding = Literal["utf-8", "utf-16", "utf-32"]
ENCODINGS: tuple[Encoding, ...] = ("utf-8", "utf-16", "utf-32")

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their breaks; a final break gives a last ''."""
    return _LINE_BREAK.split(text)


def line_count(lines: list[str]) -> int:
    """How many lines ``read`` would number: a final empty line after a break is not one."""
    if len(lines) > 1 and lines[-1] == "":
        return len(lines) - 1
    return len(lines)


def to_utf16(line: str, index: int) -> int:
    """The UTF-16 offset of code point ``index`` in ``line`` (clamped to its end)."""
    head = line[: max(index, 0)]
    if head.isascii():
        return len(head)
    return len(head) + sum(1 for char in head if ord(char) > 0xFFFF)


def from_utf16(line: str, units: int) -> int:
    """The code point index at UTF-16 offset ``units`` in ``line``: clamped to the end
    of the line, and to the start of a character whose surrogate pair it splits."""
    if units <= 0:
        return 0
    if line.isascii():
        return min(units, len(line))
    seen = 0
    for index, char in enumerate(line):
        width = 2 if ord(char) > 0xFFFF else 1
        if seen + width > units:
            return index
        seen += width
    return len(line)


def _utf8_width(char: str) -> int:
    code = ord(char)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


def to_utf8(line: str, index: int) -> int:
    """The UTF-8 byte offset of code point ``index`` in ``line`` (clamped to its end)."""
    head = line[: max(index, 0)]
    return len(head) if head.isascii() else sum(_utf8_width(char) for char in head)


def from_utf8(line: str, units: int) -> int:
    """The code point index at UTF-8 byte offset ``units``, clamped like ``from_utf16``."""
    if units <= 0:
        return 0
    if line.isascii():
        return min(units, len(line))
    seen = 0
    for index, char in enumerate(line):
        seen += _utf8_width(char)
        if seen > units:
            return index
    return len(line)


def to_wire(line: str, index: int, encoding: Encoding) -> int:
    """A code point column as the server counts it."""
    if encoding == "utf-16":
        return to_utf16(line, index)
    if encoding == "utf-8":
        return to_utf8(line, index)
    return min(max(index, 0), len(line))


def from_wire(line: str, units: int, encoding: Encoding) -> int:
    """A server's column as a code point column."""
    if encoding == "utf-16":
        return from_utf16(line, units)
    if encoding == "utf-8":
        return from_utf8(line, units)
    return min(max(units, 0), len(line))
