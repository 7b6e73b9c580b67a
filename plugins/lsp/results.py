"""What servers answer, checked and reduced to the little the tool shows.

Servers differ in which of the spec's shapes they send (``Location`` or
``LocationLink``, hierarchical ``DocumentSymbol`` or flat ``SymbolInformation``, hover
as a string, a ``MarkedString`` list or ``MarkupContent``); each is accepted here and
anything else raises :class:`Malformed`, which the tool reports as
``LSP_MALFORMED_RESPONSE`` instead of failing somewhere later. Positions stay as the
server sent them (0-based, UTF-16); ``render`` converts them against the file's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_plugins.lsp.files import from_uri


class Malformed(Exception):
    """An answer that does not have the shape the spec gives it."""


@dataclass(frozen=True)
class Span:
    """A position in a file, as on the wire: 0-based line, UTF-16 character."""

    path: Path
    line: int
    character: int


@dataclass
class Symbol:
    name: str
    kind: int
    line: int
    character: int
    path: Path | None = None
    container: str | None = None
    end: tuple[int, int] | None = None
    """Where its range ends: to nest flat lists by containment."""
    children: list[Symbol] = field(default_factory=list)


@dataclass(frozen=True)
class Diagnostic:
    line: int
    character: int
    severity: int | None
    source: str | None
    code: str | None
    message: str


def _position(value: Any, what: str) -> tuple[int, int]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} is not a position")
    line, character = value.get("line"), value.get("character")
    if not isinstance(line, int) or not isinstance(character, int) or line < 0 or character < 0:
        raise Malformed(f"{what} has no valid line and character")
    return line, character


def _range(value: Any, what: str) -> tuple[tuple[int, int], tuple[int, int]]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} is not a range")
    return _position(value.get("start"), f"{what}.start"), _position(
        value.get("end"), f"{what}.end"
    )


def _path(uri: Any, what: str) -> Path:
    path = from_uri(uri) if isinstance(uri, str) else None
    if path is None:
        raise Malformed(f"{what} is not a file URI: {str(uri)[:80]}")
    return path


def locations(result: Any) -> list[Span]:
    """``Location | Location[] | LocationLink[] | null`` as spans."""
    if result is None:
        return []
    items = result if isinstance(result, list) else [result]
    spans = []
    for item in items:
        if not isinstance(item, dict):
            raise Malformed("a location is not an object")
        if "targetUri" in item:
            where = item.get("targetSelectionRange") or item.get("targetRange")
            (line, character), _ = _range(where, "targetSelectionRange")
            spans.append(Span(_path(item["targetUri"], "targetUri"), line, character))
        else:
            (line, character), _ = _range(item.get("range"), "range")
            spans.append(Span(_path(item.get("uri"), "uri"), line, character))
    return spans


def hover_text(result: Any) -> str | None:
    """The hover's text as markdown, or None when there is nothing to say."""
    if result is None:
        return None
    if not isinstance(result, dict) or "contents" not in result:
        raise Malformed("a hover without contents")
    contents = result["contents"]
    parts = contents if isinstance(contents, list) else [contents]
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("value"), str):
            value = part["value"]
            language = part.get("language")
            if isinstance(language, str) and value.strip():
                value = f"```{language}\n{value}\n```"
            texts.append(value)
        else:
            raise Malformed("hover contents of an unknown shape")
    text = "\n\n".join(t.strip() for t in texts if t.strip())
    return text or None


def _symbol_kind(item: dict[str, Any]) -> int:
    kind = item.get("kind")
    return kind if isinstance(kind, int) else 0


def document_symbols(result: Any) -> list[Symbol]:
    """``DocumentSymbol[]`` (a tree already) or ``SymbolInformation[]`` (flat, nested
    here by range containment) as a tree."""
    if result is None:
        return []
    if not isinstance(result, list):
        raise Malformed("document symbols are not a list")
    if all(isinstance(item, dict) and "location" not in item for item in result):
        return [_document_symbol(item) for item in result]
    flat = [_symbol_information(item) for item in result]
    flat.sort(key=lambda s: ((s.line, s.character), _negated(s.end)))
    roots: list[Symbol] = []
    stack: list[Symbol] = []
    for symbol in flat:
        while stack and not _contains(stack[-1], symbol):
            stack.pop()
        (stack[-1].children if stack else roots).append(symbol)
        stack.append(symbol)
    return roots


def _negated(end: tuple[int, int] | None) -> tuple[int, int]:
    return (-end[0], -end[1]) if end is not None else (0, 0)


def _contains(outer: Symbol, inner: Symbol) -> bool:
    if outer.end is None or inner.end is None:
        return False
    start_outer, start_inner = (outer.line, outer.character), (inner.line, inner.character)
    if (start_outer, outer.end) == (start_inner, inner.end):
        return False
    return start_outer <= start_inner and inner.end <= outer.end


def _document_symbol(item: Any) -> Symbol:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise Malformed("a document symbol without a name")
    where = item.get("selectionRange") or item.get("range")
    (line, character), _ = _range(where, "selectionRange")
    children = item.get("children") or []
    if not isinstance(children, list):
        raise Malformed("document symbol children are not a list")
    return Symbol(
        name=item["name"],
        kind=_symbol_kind(item),
        line=line,
        character=character,
        children=[_document_symbol(child) for child in children],
    )


def _symbol_information(item: Any) -> Symbol:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise Malformed("a symbol without a name")
    location = item.get("location")
    if not isinstance(location, dict):
        raise Malformed("a symbol without a location")
    path = _path(location.get("uri"), "location.uri")
    line = character = 0
    end: tuple[int, int] | None = None
    if "range" in location:  # a WorkspaceSymbol may name only the file
        (line, character), end = _range(location["range"], "location.range")
    container = item.get("containerName")
    return Symbol(
        name=item["name"],
        kind=_symbol_kind(item),
        line=line,
        character=character,
        path=path,
        container=container if isinstance(container, str) and container else None,
        end=end,
    )


def workspace_symbols(result: Any) -> list[Symbol]:
    """``SymbolInformation[] | WorkspaceSymbol[] | null``, each with its file."""
    if result is None:
        return []
    if not isinstance(result, list):
        raise Malformed("workspace symbols are not a list")
    return [_symbol_information(item) for item in result]


def diagnostics(items: tuple[dict[str, Any], ...]) -> list[Diagnostic]:
    """A report's diagnostics in file order; items that are not diagnostics are skipped
    (a report is pushed to us, there is no request to fail)."""
    found = []
    for item in items:
        try:
            (line, character), _ = _range(item.get("range"), "range")
        except Malformed:
            continue
        severity, source, code = item.get("severity"), item.get("source"), item.get("code")
        message = item.get("message")
        found.append(
            Diagnostic(
                line=line,
                character=character,
                severity=severity if isinstance(severity, int) else None,
                source=source if isinstance(source, str) and source else None,
                code=str(code) if isinstance(code, str | int) and code != "" else None,
                message=" ".join(str(message or "").split()),
            )
        )
    found.sort(key=lambda d: (d.line, d.character))
    return found
