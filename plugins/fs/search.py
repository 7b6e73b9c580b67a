"""The ``glob`` and ``grep`` tools, both over ripgrep.

glob lists every file (hidden and git-ignored ones too, since a model looking for a
file by name should find it) but never walks into version-control stores; grep
searches what the project tracks, honouring .gitignore. Both cap what the model reads
and save the full result through ``context.spill`` when it is longer.

Neither shows dsh's own keys, nor, from a search over a wider folder, what is in a
secret store such as ``~/.ssh`` (:mod:`dsh.tools.protected`); the result says how many
files were left out. A search rooted in a secret store is asked for first.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh.tools import (
    Action,
    ClaudeCodeName,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    denied_reads,
)
from dsh.tools.files import Target, display_path, resolve
from dsh.tools.protected import SecretFilter
from dsh_plugins._shared.files import os_error
from dsh_plugins.fs.arguments import GlobArguments, GrepArguments
from dsh_plugins.fs.files import refuse_secret
from dsh_plugins.fs.present import glob_result, grep_result, search_call
from dsh_plugins.fs.ripgrep import RgResult, is_pattern_error, run_rg

VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
MAX_FILES = 100
MAX_MATCHES = 250
MAX_PREVIEW_BYTES = 2000
INLINE_LIMIT = 50_000
"""Above this the pipeline previews a result itself, spilled by us or not."""
_MAGIC = frozenset("*?[{")

GLOB_DESCRIPTION = """\
Find files by name with a glob pattern. A pattern without `/` matches file names at \
any depth (`*.py`, `test_*.py`); one with `/` matches paths from the search directory \
(`src/**/*.ts`, `docs/*.md`). Includes hidden and git-ignored files; skips .git and \
other version-control folders. Returns paths relative to the search directory, newest \
first, at most 100. Use grep to search inside files."""

GREP_DESCRIPTION = """\
Search file contents with a regular expression (ripgrep syntax). Searches the files \
the project does not ignore (.gitignore is honoured; hidden and binary files are \
skipped). Returns `Found N matches`, then each file's path and its matching lines as \
`Line n: text`, at most 250 matches. Narrow with path (a directory or one file) and \
include (a glob such as `*.py`). Use glob to find files by name."""


def _glob_argument(pattern: str) -> str:
    # rg reads a leading `!` as "exclude"; the model means a file name.
    return "\\" + pattern if pattern.startswith("!") else pattern


def split_pattern(pattern: str, path: str) -> tuple[str, str]:
    """(directory, pattern): an absolute pattern such as ``/repo/src/*.py`` becomes a
    search in ``/repo/src`` anchored there, since rg globs are relative."""
    pattern = pattern.removeprefix("./")
    if not os.path.isabs(pattern):
        return path, pattern
    parts = pattern.split("/")
    first = next((i for i, part in enumerate(parts) if _MAGIC & set(part)), len(parts) - 1)
    base = "/".join(parts[:first]) or "/"
    return base, "/" + "/".join(parts[first:])


def _require_directory(target: Target) -> None:
    try:
        if not target.real.is_dir():
            if target.real.exists():
                raise ToolError(
                    f"{target.display} is a file, not a directory; give glob a directory as path.",
                    "FS_NOT_DIRECTORY",
                )
            raise ToolError(f"the directory {target.display} does not exist.", "FS_NOT_FOUND")
    except OSError as error:
        raise os_error(error, target) from error


def _require_exists(target: Target) -> None:
    try:
        os.stat(target.real)
    except OSError as error:
        raise os_error(error, target) from error


def _check(result: RgResult) -> str:
    """A note for the model when rg could not read everything; raises when it could not
    search at all."""
    if result.code < 2:
        return ""
    if is_pattern_error(result.stderr):
        raise ToolError(
            f"the pattern is not valid: {result.problem}\nPatterns use ripgrep (Rust regex) "
            "syntax; escape literal ( ) [ ] { } . * + ? with a backslash.",
            "SEARCH_INVALID_PATTERN",
        )
    return f"\n\n(Some paths could not be searched: {result.problem})"


async def _spill(context: ToolContext, text: str, label: str) -> Path | None:
    if context.spill is None:
        return None
    try:
        return await asyncio.to_thread(context.spill, text, label)
    except OSError:
        return None


async def _rg(args: list[str], cwd: Path, context: ToolContext) -> RgResult:
    try:
        return await run_rg(args, cwd=cwd, signal=context.signal)
    except OSError as error:
        raise ToolError(f"ripgrep could not be started: {error}.", "SEARCH_FAILED") from error


def _output(content: str, meta: dict[str, Any], spilled: Path | None) -> ToolOutput:
    # Our own spill keeps the pipeline from spilling again, unless the capped text is
    # still too long to send whole.
    small = len(content.encode("utf-8")) <= INLINE_LIMIT
    return ToolOutput(content=content, meta=meta, spilled=spilled is not None and small)


def _searched(kind: str, target: Target, what: str) -> Action:
    return Action(risk="read", summary=f"{kind} {what} in {target.display}", reads=(target.path,))


def glob_tool() -> ToolDefinition:
    async def describe(arguments: GlobArguments, context: ToolContext) -> Action:
        base, pattern = split_pattern(arguments.pattern, arguments.path)
        folder = await asyncio.to_thread(resolve, base, context.cwd)
        return _searched("glob", folder, pattern)

    async def execute(arguments: GlobArguments, context: ToolContext) -> ToolOutput:
        base, pattern = split_pattern(arguments.pattern, arguments.path)
        folder = await asyncio.to_thread(resolve, base, context.cwd)
        refuse_secret(folder, context.cwd)
        await asyncio.to_thread(_require_directory, folder)
        args = [
            "--files",
            "--null",
            "--hidden",
            "--no-ignore",
            "--sortr=modified",
            f"--glob={_glob_argument(pattern)}",
            *(f"--glob=!{name}" for name in VCS_DIRS),
        ]
        result = await _rg(args, folder.real, context)
        note = _check(result)
        found = [raw.decode("utf-8", errors="replace") for raw in result.stdout.split(b"\0") if raw]
        secrets = SecretFilter(folder.path, denied=denied_reads(context))
        files = await asyncio.to_thread(
            lambda: [f for f in found if not secrets.hidden(folder.real / f)]
        )
        note += secrets.note()
        shown = files[:MAX_FILES]
        spilled: Path | None = None
        if not files:
            content = "No files found"
        elif len(files) <= MAX_FILES:
            content = "\n".join(shown)
        else:
            spilled = await _spill(context, "\n".join(files) + "\n", "glob")
            where = f"The full list is in {spilled}; read it, or narrow" if spilled else "Narrow"
            content = (
                "\n".join(shown) + f"\n\n({MAX_FILES} of {len(files)} files, newest first. "
                f"{where} the pattern or path to see the rest.)"
            )
        meta = {
            "path": folder.display,
            "pattern": pattern,
            "total": len(files),
            "truncated": len(files) > MAX_FILES,
            "files": shown,
            "spill": str(spilled) if spilled else None,
        }
        if secrets.skipped:
            meta["skipped"] = secrets.skipped
        return _output(content + note, meta, spilled)

    return ToolDefinition(
        name="glob",
        description=GLOB_DESCRIPTION,
        arguments=GlobArguments,
        execute=execute,
        read_only=True,
        kind="search",
        describe=describe,
        present_call=search_call("glob"),
        present_result=glob_result,
        claude_code=ClaudeCodeName("Glob"),
    )


def _text(field: dict[str, Any], fallback: Callable[[bytes], str]) -> str:
    if "text" in field:
        return str(field["text"])
    return fallback(base64.b64decode(field.get("bytes", "")))


def _preview(field: dict[str, Any]) -> str:
    line = _text(field, lambda _: "[line is not valid UTF-8]").rstrip("\n").removesuffix("\r")
    encoded = line.encode("utf-8")
    if len(encoded) <= MAX_PREVIEW_BYTES:
        return line
    return encoded[:MAX_PREVIEW_BYTES].decode("utf-8", errors="ignore") + "… [line cut]"


def parse_matches(
    stdout: bytes, cwd: Path, secrets: SecretFilter | None = None
) -> dict[str, list[tuple[int, str]]]:
    """rg's JSON matches, by file shown relative to ``cwd``, in line order; the files
    ``secrets`` hides are left out."""
    files: dict[str, list[tuple[int, str]]] = {}
    hidden: dict[str, bool] = {}
    for raw in stdout.splitlines():
        if b'"type":"match"' not in raw[:24]:
            continue
        data = json.loads(raw)["data"]
        path = _text(data["path"], lambda b: b.decode("utf-8", errors="replace"))
        if secrets is not None:
            if path not in hidden:
                hidden[path] = secrets.hidden(cwd / path)
            if hidden[path]:
                continue
        row = (int(data.get("line_number") or 0), _preview(data["lines"]))
        files.setdefault(display_path(Path(path), cwd), []).append(row)
    return files


def format_matches(files: dict[str, list[tuple[int, str]]], limit: int | None) -> str:
    blocks: list[str] = []
    left = limit
    for path in sorted(files):
        rows = files[path] if left is None else files[path][:left]
        if not rows:
            break
        blocks.append(f"{path}:\n" + "\n".join(f"  Line {n}: {text}" for n, text in rows))
        if left is not None:
            left -= len(rows)
    return "\n\n".join(blocks)


def grep_tool() -> ToolDefinition:
    async def describe(arguments: GrepArguments, context: ToolContext) -> Action:
        target = await asyncio.to_thread(resolve, arguments.path, context.cwd)
        return _searched("grep", target, repr(arguments.pattern))

    async def execute(arguments: GrepArguments, context: ToolContext) -> ToolOutput:
        target = await asyncio.to_thread(resolve, arguments.path, context.cwd)
        refuse_secret(target, context.cwd)
        await asyncio.to_thread(_require_exists, target)
        args = ["--json", f"--regexp={arguments.pattern}"]
        if arguments.include:
            args.append(f"--glob={_glob_argument(arguments.include)}")
        # The lexical path, so reported paths read as the model named them.
        args += ["--", str(target.path)]
        result = await _rg(args, context.cwd, context)
        note = _check(result)
        secrets = SecretFilter(target.path, denied=denied_reads(context))
        files = await asyncio.to_thread(parse_matches, result.stdout, context.cwd, secrets)
        note += secrets.note()
        total = sum(len(rows) for rows in files.values())
        spilled: Path | None = None
        if total == 0:
            content = "No matches found"
        elif total <= MAX_MATCHES:
            content = f"Found {total} matches\n" + format_matches(files, None)
        else:
            full = f"Found {total} matches\n" + format_matches(files, None) + "\n"
            spilled = await _spill(context, full, "grep")
            where = f"All matches are in {spilled}; read it, or narrow" if spilled else "Narrow"
            content = (
                f"Found {MAX_MATCHES} of {total} matches\n"
                + format_matches(files, MAX_MATCHES)
                + f"\n\n({where} the search with path, include or a more specific pattern.)"
            )
        meta = {
            "path": target.display,
            "pattern": arguments.pattern,
            "include": arguments.include or None,
            "total": total,
            "files": len(files),
            "truncated": total > MAX_MATCHES,
            "spill": str(spilled) if spilled else None,
        }
        if secrets.skipped:
            meta["skipped"] = secrets.skipped
        return _output(content + note, meta, spilled)

    return ToolDefinition(
        name="grep",
        description=GREP_DESCRIPTION,
        arguments=GrepArguments,
        execute=execute,
        read_only=True,
        kind="search",
        describe=describe,
        present_call=search_call("grep"),
        present_result=grep_result,
        claude_code=ClaudeCodeName("Grep", fields=(("include", "glob"),)),
    )
