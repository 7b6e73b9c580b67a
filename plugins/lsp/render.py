"""The tool's answers as compact text: ``path:line:col`` with paths relative to the
working directory and 1-based lines and characters counted in code points (what
``read`` shows), each location followed by its source line; capped lists that say how
much was left out; never more than ``MAX_OUTPUT_CHARS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from dsh.tools.files import display_path
from dsh_plugins.lsp.positions import Encoding, from_wire
from dsh_plugins.lsp.results import Diagnostic, Span, Symbol

MAX_LOCATIONS = 100
MAX_SYMBOLS = 200
MAX_DIAGNOSTICS = 50
MAX_OUTPUT_CHARS = 16_000
SNIPPET_CHARS = 120

SYMBOL_KINDS = (
    "symbol", "file", "module", "namespace", "package", "class", "method", "property",
    "field", "constructor", "enum", "interface", "function", "variable", "constant",
    "string", "number", "boolean", "array", "object", "key", "null", "enum-member",
    "struct", "event", "operator", "type-parameter",
)  # fmt: skip
SEVERITIES = {1: "error", 2: "warning", 3: "info", 4: "hint"}

Texts = Mapping[Path, list[str] | None]
"""Each file's lines (None: unreadable), to convert columns and quote source lines."""


def kind_name(kind: int) -> str:
    return SYMBOL_KINDS[kind] if 0 < kind < len(SYMBOL_KINDS) else "symbol"


def column(lines: list[str] | None, line: int, units: int, encoding: Encoding) -> int:
    """The 0-based code point column of a server's column on ``line`` (unchanged when
    the line's text is unknown)."""
    if lines is None or line >= len(lines):
        return units
    return from_wire(lines[line], units, encoding)


def snippet(lines: list[str] | None, line: int) -> str:
    if lines is None or line >= len(lines):
        return ""
    text = lines[line].strip()
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def location(span: Span, cwd: Path, texts: Texts, encoding: Encoding) -> str:
    lines = texts.get(span.path)
    col = column(lines, span.line, span.character, encoding)
    where = f"{display_path(span.path, cwd)}:{span.line + 1}:{col + 1}"
    source = snippet(lines, span.line)
    return f"{where}  {source}" if source else where


def capped(rows: list[str], limit: int) -> list[str]:
    if len(rows) <= limit:
        return rows
    return [*rows[:limit], f"({len(rows) - limit} more)"]


def locations(spans: list[Span], cwd: Path, texts: Texts, encoding: Encoding, empty: str) -> str:
    if not spans:
        return empty
    rows = [location(span, cwd, texts, encoding) for span in spans]
    return "\n".join(capped(rows, MAX_LOCATIONS))


def document_symbols(symbols: list[Symbol], lines: list[str] | None, empty: str) -> str:
    rows: list[str] = []

    def walk(items: list[Symbol], depth: int) -> None:
        for symbol in items:
            rows.append(
                f"{'  ' * depth}{kind_name(symbol.kind)} {symbol.name}  line {symbol.line + 1}"
            )
            walk(symbol.children, depth + 1)

    walk(symbols, 0)
    return "\n".join(capped(rows, MAX_SYMBOLS)) if rows else empty


def workspace_symbols(symbols: list[Symbol], cwd: Path, empty: str) -> str:
    rows = []
    for symbol in symbols:
        where = display_path(symbol.path, cwd) if symbol.path is not None else "?"
        if symbol.end is not None:
            where += f":{symbol.line + 1}"
        inside = f" (in {symbol.container})" if symbol.container else ""
        rows.append(f"{kind_name(symbol.kind)} {symbol.name}{inside}  {where}")
    return "\n".join(capped(rows, MAX_LOCATIONS)) if rows else empty


def diagnostic(
    shown: str,
    item: Diagnostic,
    lines: list[str] | None,
    encoding: Callable[[str | None], Encoding],
) -> str:
    col = column(lines, item.line, item.character, encoding(item.source))
    severity = SEVERITIES.get(item.severity or 1, "error")
    origin = "/".join(part for part in (item.source, item.code) if part)
    tag = f" [{origin}]" if origin else ""
    return f"{shown}:{item.line + 1}:{col + 1} {severity}{tag} {item.message}"


def diagnostics(
    shown: str,
    items: list[Diagnostic],
    lines: list[str] | None,
    encoding: Callable[[str | None], Encoding],
) -> list[str]:
    """One line each; ``encoding`` says how the columns of each source are counted."""
    rows = [diagnostic(shown, item, lines, encoding) for item in items]
    return capped(rows, MAX_DIAGNOSTICS)


def clip(text: str) -> str:
    """At most MAX_OUTPUT_CHARS, cut at a line break, saying so."""
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    cut = text.rfind("\n", 0, MAX_OUTPUT_CHARS - 80)
    cut = cut if cut > 0 else MAX_OUTPUT_CHARS - 80
    return f"{text[:cut]}\n(output cut at {MAX_OUTPUT_CHARS} characters)"
