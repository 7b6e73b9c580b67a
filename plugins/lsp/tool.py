"""The ``lsp`` tool: ask the project's language server where a symbol is defined and
used, what it is, what a file declares, and what is wrong with a file.

Each call finds the server for the file's language (starting it on first use), shows
it the file as it is on disk now, converts the position from what ``read`` shows
(1-based line, 1-based character in code points) to the wire's (0-based, UTF-16), and
renders the answer with ``render``.

The file asked about is named in the call's action (``reads``), so dsh's own keys are
refused and a secret store is asked for first; result lines are never shown from
those files.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from dsh.tools import (
    Action,
    CallResult,
    TextView,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    denied_reads,
)
from dsh.tools.files import display_path, resolve
from dsh.tools.protected import SecretFilter, refusal
from dsh_plugins.lsp import render, results
from dsh_plugins.lsp.files import Source, read_lines_quietly, read_source
from dsh_plugins.lsp.positions import Encoding, line_count, split_lines, to_wire
from dsh_plugins.lsp.server import LanguageServer
from dsh_plugins.lsp.service import LspService

Operation = Literal[
    "definition", "references", "hover", "document_symbols", "workspace_symbols", "diagnostics"
]
AT_POSITION = ("definition", "references", "hover")
QUIET_S = 0.3
"""After a fresh diagnostics report, how long to wait for a follow-up (servers that
report in stages)."""
SCAN_LIMIT = 2000
"""Directory entries looked at to guess a workspace's language."""

DESCRIPTION = """\
Ask the language server (code intelligence, as in an IDE) about source code. Operations:
- definition: where the symbol at file_path:line:character is defined.
- references: every use of that symbol in the workspace, its declaration included.
- hover: its type, signature and documentation.
- document_symbols: the classes, functions, etc. declared in file_path, as a tree.
- workspace_symbols: declarations whose name matches query, across the workspace.
- diagnostics: the errors and warnings the server reports for file_path.
line and character are 1-based, as read shows them (character counts characters in \
the line, a tab is one); point at any character of the symbol's name. Results are \
`path:line:character` followed by the source line. Prefer this to grep for finding \
a symbol's definition and uses: it follows imports and ignores same-named strings."""


class LspArguments(BaseModel):
    operation: Operation = Field(description="What to ask; see the tool description.")
    file_path: str = Field(
        default="",
        description="The file to ask about: absolute, or relative to the working directory. "
        "Required except for workspace_symbols (where it picks the language).",
    )
    line: int = Field(
        default=0,
        description="1-based line of the symbol. Required for definition, references, hover.",
    )
    character: int = Field(
        default=0,
        description="1-based character of the symbol within the line. Required for "
        "definition, references, hover.",
    )
    query: str = Field(
        default="", description="For workspace_symbols: the name, or part of it, to look for."
    )

    @field_validator("file_path", "query", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("line", "character", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        return 0 if value is None else value

    @model_validator(mode="after")
    def _required(self) -> LspArguments:
        if "\x00" in self.file_path:
            raise ValueError("file_path must not contain a NUL character")
        if self.operation != "workspace_symbols" and not self.file_path.strip():
            raise ValueError(f"file_path is required for {self.operation}")
        if self.operation in AT_POSITION:
            if self.line < 1 or self.character < 1:
                raise ValueError(
                    f"line and character (both 1 or more) are required for {self.operation}"
                )
        elif self.line < 0 or self.character < 0:
            raise ValueError("line and character must be 1 or more")
        return self


def lsp_tool(service: LspService) -> ToolDefinition:
    config = service.config

    async def describe(arguments: LspArguments, context: ToolContext) -> Action:
        summary = _call_title(arguments.model_dump())
        if not arguments.file_path.strip():
            return Action(risk="read", summary=summary)
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        return Action(risk="read", summary=summary, reads=(target.path,))

    async def execute(arguments: LspArguments, context: ToolContext) -> ToolOutput:
        if arguments.file_path.strip():
            target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
            refused = refusal(target.real, context.cwd)
            if refused is not None:
                raise ToolError(f"refused: {refused.reason}.", "LSP_REFUSED")
        if arguments.operation == "workspace_symbols":
            text = await _workspace_symbols(service, arguments, context)
        else:
            text = await _on_file(service, arguments, context)
        return ToolOutput(content=render.clip(text))

    return ToolDefinition(
        name="lsp",
        description=DESCRIPTION,
        arguments=LspArguments,
        execute=execute,
        read_only=True,
        kind="search",
        describe=describe,
        # Starting a server, one request, then waiting for diagnostics; the requests
        # have their own timeouts, this only backs them up.
        timeout_s=2 * config.request_timeout_s + config.diagnostics_wait_s + 30,
        present_call=_present_call,
        present_result=_present_result,
    )


# ---------------------------------------------------------------------- operations


async def _on_file(service: LspService, arguments: LspArguments, context: ToolContext) -> str:
    path = (await asyncio.to_thread(resolve, arguments.file_path, context.cwd)).real
    shown = display_path(path, context.cwd)
    name = service.catalog.server_name(path)
    source = await _read(service, path, shown)
    server = await service.server(name, context.cwd)
    seq = server.diagnostics.seq
    version, changed = await service.open(server, source)
    lines = split_lines(source.text)
    operation = arguments.operation
    if operation == "document_symbols":
        _require(server, "documentSymbolProvider", operation)
        answer = await server.request(
            "textDocument/documentSymbol", {"textDocument": _document(path)}
        )
        return render.document_symbols(
            _checked(results.document_symbols, answer, server, operation),
            lines,
            f"No symbols in {shown}.",
        )
    if operation == "diagnostics":
        return await _diagnostics(service, server, source, shown, lines, seq, version, changed)

    position = _position(lines, arguments.line, arguments.character, shown, server.encoding)
    params: dict[str, Any] = {"textDocument": _document(path), "position": position}
    if operation == "hover":
        _require(server, "hoverProvider", operation)
        answer = await server.request("textDocument/hover", params)
        text = _checked(results.hover_text, answer, server, operation)
        return text if text is not None else "No hover information."
    if operation == "definition":
        _require(server, "definitionProvider", operation)
        answer = await server.request("textDocument/definition", params)
        spans = _checked(results.locations, answer, server, operation)
        empty = "No definition found."
    else:
        _require(server, "referencesProvider", operation)
        params["context"] = {"includeDeclaration": True}
        answer = await server.request("textDocument/references", params)
        spans = sorted(
            set(_checked(results.locations, answer, server, operation)),
            key=lambda s: (str(s.path), s.line, s.character),
        )
        empty = "No references found."
    texts = await _texts(server, spans, {source.path: lines}, denied_reads(context))
    return render.locations(spans, context.cwd, texts, server.encoding, empty)


async def _diagnostics(
    service: LspService,
    server: LanguageServer,
    source: Source,
    shown: str,
    lines: list[str],
    seq: int,
    version: int,
    changed: bool,
) -> str:
    """The file's current diagnostics: those already reported for this version, else
    the next report (and any follow-up within QUIET_S), waited for at most
    ``diagnostics_wait_s``."""
    entry = server.diagnostics.get(source.path)
    fresh = entry is not None and (entry.version is None or entry.version >= version)
    if changed or not fresh:
        after = seq if changed else (entry.seq if entry is not None else 0)
        waited = await server.diagnostics.wait(
            source.path,
            after=after,
            version=version,
            within=service.config.diagnostics_wait_s,
            quiet=QUIET_S,
        )
        entry = waited or server.diagnostics.get(source.path)
    if entry is None:
        return (
            f"No diagnostics reported for {shown} (the {server.label} sent none within "
            f"{service.config.diagnostics_wait_s:g} s)."
        )
    items = results.diagnostics(entry.items)
    if not items:
        return "No diagnostics."
    return "\n".join(render.diagnostics(shown, items, lines, server.diagnostic_encoding))


async def _workspace_symbols(
    service: LspService, arguments: LspArguments, context: ToolContext
) -> str:
    """Asks the server of file_path's language; without one, every server running for
    the workspace, or else the server of the language most files in it are in."""
    servers: list[LanguageServer]
    if arguments.file_path.strip():
        path = (await asyncio.to_thread(resolve, arguments.file_path, context.cwd)).real
        servers = [await service.server(service.catalog.server_name(path), context.cwd)]
    else:
        root = await service.workspace(context.cwd)
        servers = service.running(root=root)
        if not servers:
            name = await asyncio.to_thread(_guess_language, service, root)
            if name is None:
                raise ToolError(
                    "no source files of a language with a configured server were found "
                    "near the working directory; pass file_path (any file of the "
                    "language) to choose the server.",
                    "LSP_UNAVAILABLE",
                )
            servers = [await service.server(name, context.cwd)]
    able = [s for s in servers if s.capabilities.get("workspaceSymbolProvider")]
    if not able:
        labels = ", ".join(s.label for s in servers)
        raise ToolError(
            f"the {labels} does not support workspace_symbols. Use grep to find the "
            "declaration (e.g. `class Name|def name`), then document_symbols or "
            "definition on it.",
            "LSP_UNSUPPORTED",
        )
    symbols: list[results.Symbol] = []
    for server in able:
        answer = await server.request("workspace/symbol", {"query": arguments.query})
        symbols.extend(_checked(results.workspace_symbols, answer, server, "workspace_symbols"))
    empty = f"No symbols match {arguments.query!r}." if arguments.query else "No symbols."
    return render.workspace_symbols(symbols, context.cwd, empty)


# ---------------------------------------------------------------------- helpers


async def _read(service: LspService, path: Path, shown: str) -> Source:
    try:
        return await asyncio.to_thread(read_source, path, shown)
    except ToolError as error:
        if error.code == "FS_NOT_FOUND":
            await service.forget(path)
        raise


def _document(path: Path) -> dict[str, str]:
    return {"uri": path.as_uri()}


def _position(
    lines: list[str], line: int, character: int, shown: str, encoding: Encoding
) -> dict[str, int]:
    """The wire position of a 1-based line and code point character, or
    LSP_INVALID_POSITION saying what the file holds."""
    count = line_count(lines)
    if line > count:
        raise ToolError(
            f"line {line} is past the end of {shown}, which has {count} "
            f"line{'s' if count != 1 else ''}.",
            "LSP_INVALID_POSITION",
        )
    text = lines[line - 1]
    if character > len(text) + 1:
        raise ToolError(
            f"character {character} is past the end of line {line} of {shown}, which has "
            f"{len(text)} character{'s' if len(text) != 1 else ''}: {text.strip()[:80]!r}.",
            "LSP_INVALID_POSITION",
        )
    return {"line": line - 1, "character": to_wire(text, character - 1, encoding)}


def _require(server: LanguageServer, capability: str, operation: str) -> None:
    if not server.capabilities.get(capability):
        raise ToolError(f"the {server.label} does not support {operation}.", "LSP_UNSUPPORTED")


def _checked(parse: Any, answer: Any, server: LanguageServer, operation: str) -> Any:
    try:
        return parse(answer)
    except results.Malformed as error:
        raise ToolError(
            f"the {server.label} answered {operation} with something malformed: {error}.",
            "LSP_MALFORMED_RESPONSE",
        ) from None


async def _texts(
    server: LanguageServer,
    spans: list[results.Span],
    known: dict[Path, list[str]],
    denied: Callable[[Path], bool] | None = None,
) -> dict[Path, list[str] | None]:
    """The lines of every file the spans are in: from what we have, what the server has
    open, else the disk (one worker thread for them all)."""
    texts: dict[Path, list[str] | None] = dict(known)
    missing = []
    secrets = SecretFilter(denied=denied)
    for span in spans[: render.MAX_LOCATIONS]:
        if span.path in texts:
            continue
        if secrets.hidden(span.path):  # a location, but never a line of dsh's keys
            texts[span.path] = None
            continue
        document = server.documents.get(span.path)
        if document is not None:
            texts[span.path] = split_lines(document.text)
        else:
            texts[span.path] = None
            missing.append(span.path)
    if missing:
        read = await asyncio.to_thread(lambda: [read_lines_quietly(p) for p in missing])
        for path, text in zip(missing, read, strict=True):
            texts[path] = split_lines(text) if text is not None else None
    return texts


def _guess_language(service: LspService, root: Path) -> str | None:
    """The server whose extensions most files near ``root`` have (the root and its
    direct subfolders, hidden ones and dependency folders skipped). Blocking."""
    counts: Counter[str] = Counter()
    seen = 0
    folders = [root]
    skip = {"node_modules", "venv", "target", "build", "dist", "__pycache__"}
    for depth in range(2):
        next_folders = []
        for folder in folders:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > SCAN_LIMIT or entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if depth == 0 and entry.name not in skip:
                        next_folders.append(Path(entry.path))
                    continue
                name = service.catalog.server_name_or_none(Path(entry.name))
                if name is not None:
                    counts[name] += 1
        folders = next_folders
    return counts.most_common(1)[0][0] if counts else None


# ---------------------------------------------------------------------- presentation


def _call_title(arguments: dict[str, Any]) -> str:
    operation = str(arguments.get("operation", ""))
    where = str(arguments.get("file_path") or "")
    if arguments.get("line"):
        where += f":{arguments['line']}:{arguments.get('character') or 1}"
    if operation == "workspace_symbols":
        where = repr(arguments.get("query") or "")
    return f"lsp {operation} {where}".rstrip()


def _present_call(arguments: dict[str, Any]) -> TextView:
    return TextView(title=_call_title(arguments))


def _present_result(arguments: dict[str, Any], result: CallResult) -> TextView:
    return TextView(title=_call_title(arguments), body=result.text or None)
