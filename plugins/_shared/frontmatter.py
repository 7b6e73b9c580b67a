"""The ``---`` front matter of a Markdown file (a skill, a custom command): a small
YAML subset, read without a YAML library (dsh takes no dependency for a few keys).

Read: top-level ``key: value`` lines, with values plain, single- or double-quoted, a
``|`` or ``>`` block, or plain text continued on indented lines; blank lines and
``#`` comments. A key with nested content (a mapping or a list, such as ``metadata``
or ``allowed-tools``) gets its indented lines folded into one string, which is fine
for the keys that are ignored. Anything else is an error naming the line, so a skill
whose header is broken is reported rather than half-read.
"""

from __future__ import annotations

import re

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)\s*:(?:\s+(.*?))?\s*$")
_BLOCK = re.compile(r"^([|>])[+-]?$")  # chomping is moot: values are trimmed
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "r": "\r", "0": "\0"}
_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


class FrontMatterError(ValueError):
    """The front matter cannot be read; the message says where and why."""


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``(fields, body)``. Without a leading ``---`` line there are no fields and the
    whole text is the body. Keys are lower-cased with ``_`` as ``-``."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        raise FrontMatterError("the front matter has no closing '---' line")
    fields = _parse(lines[1:end])
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return fields, body


def parse_bool(value: str, key: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise FrontMatterError(f"{key} must be true or false, not {value!r}")


def _parse(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        number = index + 2  # the file's own line number: '---' is line 1
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            raise FrontMatterError(f"line {number}: unexpected indentation")
        match = _KEY.match(line)
        if match is None:
            raise FrontMatterError(f"line {number}: expected 'key: value', got {line.strip()!r}")
        key, raw = match.group(1), match.group(2) or ""
        continued: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][0] in " \t"):
            continued.append(lines[index])
            index += 1
        while continued and not continued[-1].strip():
            continued.pop()
        fields[key.lower().replace("_", "-")] = _value(raw, continued, number)
    return fields


def _value(raw: str, continued: list[str], number: int) -> str:
    block = _BLOCK.match(raw)
    if block is not None:
        return _block(block.group(1), continued)
    if raw.startswith('"'):
        return _double_quoted(" ".join([raw, *(line.strip() for line in continued)]), number)
    if raw.startswith("'"):
        return _single_quoted(" ".join([raw, *(line.strip() for line in continued)]), number)
    plain = _strip_comment(raw)
    parts = [plain, *(_strip_comment(line.strip()) for line in continued)]
    return " ".join(part for part in parts if part)


def _block(style: str, lines: list[str]) -> str:
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    indent = min(indents, default=0)
    texts = [line[indent:] if line.strip() else "" for line in lines]
    if style == "|":
        text = "\n".join(texts)
    else:  # folded: lines of a paragraph joined by spaces, blank lines kept as breaks
        paragraphs = "\n".join(texts).split("\n\n")
        text = "\n".join(" ".join(p.split("\n")).strip() for p in paragraphs)
    return text.strip("\n")


def _double_quoted(raw: str, number: int) -> str:
    out: list[str] = []
    position = 1
    while position < len(raw):
        char = raw[position]
        if char == "\\" and position + 1 < len(raw):
            out.append(_ESCAPES.get(raw[position + 1], raw[position + 1]))
            position += 2
            continue
        if char == '"':
            _only_comment_after(raw[position + 1 :], number)
            return "".join(out)
        out.append(char)
        position += 1
    raise FrontMatterError(f"line {number}: a double-quoted value is not closed")


def _single_quoted(raw: str, number: int) -> str:
    out: list[str] = []
    position = 1
    while position < len(raw):
        char = raw[position]
        if char == "'":
            if raw[position + 1 : position + 2] == "'":
                out.append("'")
                position += 2
                continue
            _only_comment_after(raw[position + 1 :], number)
            return "".join(out)
        out.append(char)
        position += 1
    raise FrontMatterError(f"line {number}: a single-quoted value is not closed")


def _only_comment_after(rest: str, number: int) -> None:
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise FrontMatterError(f"line {number}: text after a quoted value: {rest!r}")


def _strip_comment(text: str) -> str:
    """A plain value without a trailing `` # comment`` (a ``#`` inside a word stays)."""
    cut = re.search(r"(?:^|\s)#", text)
    return (text[: cut.start()] if cut else text).strip()
