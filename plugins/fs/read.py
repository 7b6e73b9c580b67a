"""The ``read`` tool: a window of a text file as numbered lines.

The file is streamed, never loaded whole: lines before the window are only counted,
lines in it are decoded and cut to size, and after the window the rest is counted in
large blocks so the footer can give the exact total.
"""

from __future__ import annotations

import asyncio
import codecs
import difflib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from dsh.llm import TextBlock
from dsh.tools import Action, ClaudeCodeName, ToolContext, ToolDefinition, ToolError, ToolOutput
from dsh.tools.files import Target, WorkspaceFiles, resolve
from dsh_plugins._shared.files import SNIFF_BYTES, not_text, os_error, require_regular, sniff
from dsh_plugins._shared.images import (
    ImageError,
    attach_file,
    label,
    looks_like_image,
    registered,
    vision_of,
)
from dsh_plugins.fs.arguments import ReadArguments
from dsh_plugins.fs.files import refuse_secret, version_of
from dsh_plugins.fs.observed import FsState
from dsh_plugins.fs.present import read_call, read_result
from dsh_plugins.fs.workspace import stand_in, text_or_missing, text_version

MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 50 * 1024
CHUNK = 64 * 1024
"""A line longer than this is read in pieces and only its head kept."""
COUNT_BLOCK = 1024 * 1024

DESCRIPTION = """\
Read a text file. Returns numbered lines (`n: text`) from `offset` (1-based), up to \
2000 lines or 50 KiB; a footer gives the total line count and the offset to continue \
from. Lines longer than 2000 characters are cut. Read a file before you write over it \
or edit it (any window counts); if it changes after your read, read it again. An image \
(JPEG, PNG, GIF, WebP) is shown to you when you can see images; binary files are refused. Use glob to find files and grep to search their contents."""

_LANGUAGES = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "jsx", ".ts": "typescript", ".tsx": "tsx",
    ".rs": "rust", ".go": "go", ".java": "java", ".kt": "kotlin", ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp", ".rb": "ruby",
    ".php": "php", ".swift": "swift", ".sh": "bash", ".bash": "bash", ".zsh": "bash",
    ".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".md": "markdown",
    ".html": "html", ".css": "css", ".scss": "scss", ".sql": "sql", ".xml": "xml",
    ".lua": "lua", ".dockerfile": "docker", ".ini": "ini", ".cfg": "ini",
}  # fmt: skip


def language(name: str) -> str | None:
    if name == "Dockerfile":
        return "docker"
    return _LANGUAGES.get(os.path.splitext(name)[1].lower())


@dataclass(frozen=True)
class Window:
    version: str
    rows: list[str]
    first: int
    """The line number of the first row."""
    total: int
    capped: bool
    """Stopped at the byte cap rather than the line limit."""
    lossy: bool
    """Some shown line was not valid UTF-8."""


def _lines(handle: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Each line's bytes (at most CHUNK of them, newline included) and whether it was
    longer; a giant line costs a scan, not its size in memory."""
    while True:
        piece = handle.readline(CHUNK)
        if not piece:
            return
        if piece.endswith(b"\n") or len(piece) < CHUNK:
            yield piece, False
            continue
        rest = piece
        while rest and not rest.endswith(b"\n"):
            rest = handle.readline(CHUNK)
        yield piece, True


def _count_rest(handle: IO[bytes]) -> int:
    """Lines left from the current position, counted in blocks."""
    count = 0
    last = b"\n"
    while block := handle.read(COUNT_BLOCK):
        count += block.count(b"\n")
        last = block[-1:]
    return count + (last != b"\n")


def _skip(handle: IO[bytes], count: int) -> int:
    """Move past ``count`` lines, found in blocks rather than line by line; returns how
    many there were (fewer when the file ends first)."""
    skipped = 0
    last = b"\n"
    while skipped < count:
        start = handle.tell()
        block = handle.read(COUNT_BLOCK)
        if not block:
            return skipped + (last != b"\n")
        newlines = block.count(b"\n")
        if skipped + newlines < count:
            skipped += newlines
            last = block[-1:]
            continue
        position = -1
        for _ in range(count - skipped):
            position = block.index(b"\n", position + 1)
        handle.seek(start + position + 1)
        return count
    return skipped


def _decode(raw: bytes, cut: bool) -> tuple[str, bool]:
    """The text of one line, and whether it had to be decoded lossily."""
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    try:
        # A cut line may end inside a character: decode it as a stream that goes on.
        return codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=not cut), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), True


def read_window(target: Target, offset: int, limit: int) -> Window:
    """Blocking: open, check, and read the window of ``target``."""
    try:
        fd = os.open(target.real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise os_error(error, target) from error
    try:
        status = os.fstat(fd)
        require_regular(status, target)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        try:
            kind = sniff(handle.read(SNIFF_BYTES))
            if kind is not None:
                raise not_text(target, kind, status.st_size)
            handle.seek(0)
            return _window(handle, version_of(status), offset, limit)
        except OSError as error:
            raise os_error(error, target) from error


def text_window(text: str, version: str, offset: int, limit: int) -> Window:
    """The window of a text already in memory (read through a stand-in for the disk)."""
    return _window(io.BytesIO(text.encode("utf-8", errors="replace")), version, offset, limit)


def _window(handle: IO[bytes], version: str, offset: int, limit: int) -> Window:
    rows: list[str] = []
    used = 0
    skipped = _skip(handle, offset - 1)
    number = skipped
    capped = lossy = False
    for number, (raw, cut) in enumerate(_lines(handle), skipped + 1):
        text, bad = _decode(raw, cut)
        if number == 1:
            text = text.removeprefix("\ufeff")
        if cut or len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + f"… [line cut at {MAX_LINE_CHARS} characters]"
        row = f"{number}: {text}"
        size = len(row.encode("utf-8", errors="replace")) + 1
        if used + size > MAX_OUTPUT_BYTES and rows:
            capped = True
            break
        rows.append(row)
        used += size
        lossy = lossy or bad
        if len(rows) == limit:
            break
    # Lines up to `number` are consumed (the one that did not fit included).
    total = number + _count_rest(handle)
    return Window(version, rows, offset, total, capped, lossy)


def footer(window: Window) -> str:
    if window.total == 0:
        return "(The file is empty.)"
    last = window.first + len(window.rows) - 1
    if last >= window.total:
        note = f"(End of file: {window.total} lines in total.)"
    else:
        shown = f"lines {window.first}-{last} of {window.total}"
        why = "Output capped at 50 KiB; showing" if window.capped else "Showing"
        note = f"({why} {shown}. Use offset={last + 1} to read more.)"
    if window.lossy:
        note += (
            "\n(The file is not valid UTF-8: undecodable bytes are shown as U+FFFD. "
            "edit cannot change it; write can replace it whole.)"
        )
    return note


def read_tool(state: FsState) -> ToolDefinition:
    async def describe(arguments: ReadArguments, context: ToolContext) -> Action:
        # The file read, so the permission policy can refuse dsh's keys and ask
        # before a secret store (~/.ssh/id_rsa) is read.
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        return Action(risk="read", summary=f"read {target.display}", reads=(target.path,))

    async def execute(arguments: ReadArguments, context: ToolContext) -> ToolOutput:
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        refuse_secret(target, context.cwd)
        files = stand_in(context)
        if files is not None and await asyncio.to_thread(text_or_missing, target):
            return await read_through(files, target, arguments, context)
        try:
            window = await asyncio.to_thread(read_window, target, arguments.offset, arguments.limit)
        except ToolError as error:
            if error.code == "FS_NOT_FOUND":
                state.observations.record(context.session_id, target, None)
                raise ToolError(await asyncio.to_thread(_missing, target), error.code) from None
            if error.code == "FS_NOT_TEXT":
                # The model now knows what the file is; replacing it whole is its call.
                current = await asyncio.to_thread(_version, target)
                state.observations.record(context.session_id, target, current)
                image = await _image(target, context)
                if image is not None:
                    return image
            raise
        state.observations.record(context.session_id, target, window.version)
        return _output(target, window, arguments)

    async def read_through(
        files: WorkspaceFiles, target: Target, arguments: ReadArguments, context: ToolContext
    ) -> ToolOutput:
        """Read from what stands in for the disk (an editor: its unsaved text)."""
        try:
            text = await files.read_text(target.real)
        except FileNotFoundError:
            state.observations.record(context.session_id, target, None)
            raise ToolError(await asyncio.to_thread(_missing, target), "FS_NOT_FOUND") from None
        except OSError as error:
            raise os_error(error, target) from None
        version = text_version(text)
        window = text_window(text, version, arguments.offset, arguments.limit)
        state.observations.record(context.session_id, target, version, text)
        return _output(target, window, arguments)

    return ToolDefinition(
        name="read",
        description=DESCRIPTION,
        arguments=ReadArguments,
        execute=execute,
        read_only=True,
        kind="read",
        describe=describe,
        spill_output=False,
        present_call=read_call,
        present_result=read_result,
        claude_code=ClaudeCodeName("Read"),
    )


def _output(target: Target, window: Window, arguments: ReadArguments) -> ToolOutput:
    if not window.rows and window.total > 0:
        raise ToolError(
            f"offset {arguments.offset} is past the end of {target.display}, which has "
            f"{window.total} lines; use an offset from 1 to {window.total}.",
            "FS_NOT_FOUND",
        )
    body = "\n".join(window.rows)
    content = (
        f"<path>{target.display}</path>\n<type>file</type>\n<content>\n"
        f"{body}{chr(10) * 2 if body else ''}{footer(window)}\n</content>"
    )
    meta = {
        "path": target.display,
        "file": str(target.real),
        "offset": window.first,
        "lines": len(window.rows),
        "total_lines": window.total,
        "lang": language(target.path.name),
    }
    return ToolOutput(content=content, meta=meta)


async def _image(target: Target, context: ToolContext) -> ToolOutput | None:
    """The image itself, for a model that takes images; None otherwise (the model
    hears what the file is, as for any file that is not text)."""
    agent = context.agent
    if agent is None or not registered() or not vision_of(agent):
        return None
    if not await asyncio.to_thread(looks_like_image, target.real):
        return None
    try:
        image = await attach_file(agent, target.real, target.display, "tool")
    except ImageError as error:
        raise ToolError(f"{target.display}: {error}.", "FS_NOT_TEXT") from None
    text = f"<path>{target.display}</path>\n<type>image</type>\n{label(image)}"
    meta = {"path": target.display, "file": str(target.real), "image": label(image)}
    return ToolOutput(content=(TextBlock(text=text), image), meta=meta)


def _version(target: Target) -> str | None:
    try:
        return version_of(os.stat(target.real))
    except OSError:
        return None


def _missing(target: Target) -> str:
    """Not found, with the names in its folder that look like what was meant."""
    message = f"{target.display} does not exist."
    try:
        names = os.listdir(target.path.parent)
    except OSError:
        return f"{message} Its directory does not exist either; check the path (glob finds files by name)."
    close = difflib.get_close_matches(target.path.name, names, n=3, cutoff=0.6)
    if close:
        listed = ", ".join(close)
        return f"{message} Did you mean one of these, in the same directory: {listed}?"
    return f"{message} Check the path (glob finds files by name)."
