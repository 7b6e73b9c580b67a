"""Reading an image from the system clipboard, as Claude Code does on Ctrl+V: a
terminal pastes text only, so dsh asks the clipboard program of the desktop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys

from dsh.processes import helper_command

TIMEOUT_S = 5.0
MAX_BYTES = 60 * 1024 * 1024

NO_TOOL = (
    "No clipboard program to read an image from: install wl-clipboard (Wayland), xclip "
    "(X11) or pngpaste (macOS), or save the image and attach it with @path or /image PATH."
)


def commands() -> list[list[str]]:
    """The programs that can read an image from this desktop's clipboard, best first."""
    found: list[list[str]] = []
    if os.environ.get("WAYLAND_DISPLAY") and shutil.which("wl-paste"):
        found.append(["wl-paste", "--no-newline", "--type", "image/png"])
    if os.environ.get("DISPLAY") and shutil.which("xclip"):
        found.append(["xclip", "-selection", "clipboard", "-target", "image/png", "-out"])
    if sys.platform == "darwin" and shutil.which("pngpaste"):
        found.append(["pngpaste", "-"])
    return found


async def read_image() -> bytes | None:
    """The clipboard's image as PNG bytes, None when it holds none. Raises
    :class:`LookupError` (saying what to install) when no program can read it."""
    programs = commands()
    if not programs:
        raise LookupError(NO_TOOL)
    for argv in programs:
        line, options = helper_command(argv)
        try:
            process = await asyncio.create_subprocess_exec(
                *line,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                **options,
            )
        except OSError:
            continue
        try:
            out, _ = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            continue
        if process.returncode == 0 and out and len(out) <= MAX_BYTES:
            return out
    return None
