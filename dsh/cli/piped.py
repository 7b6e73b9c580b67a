"""What ``dsh -p`` reads from a pipe: the prompt itself, or text to go with one.

``git diff | dsh -p "review this change"`` asks about the diff: the piped text follows
the prompt, after a blank line. A pipe that stays open and silent (a program that
starts dsh and never closes its stdin, as CI runners and editors do) must not hang a
run that was given its prompt, so a pipe with neither data nor an end within
:data:`WAIT_S` is left alone, and stderr says so. A terminal is never read; a file
(``< notes.txt``) is read whole.
"""

from __future__ import annotations

import os
import select
import stat
from typing import BinaryIO, TextIO

WAIT_S = 3.0
"""How long a given prompt waits for a pipe to say something or close."""


def _waits_for_writer(fd: int) -> bool:
    """Whether reading ``fd`` can block until another program writes: a pipe or a
    socket (a regular file or a device answers at once)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _text(data: bytes) -> str:
    # Bytes that are not UTF-8 (a binary diff) become U+FFFD rather than failing the
    # run: the model is sent JSON, which cannot carry them either.
    return data.decode("utf-8", errors="replace")


def piped_text(stdin: BinaryIO, err: TextIO, *, prompt_given: bool) -> str | None:
    """The text on stdin, or None when there is none to read (a terminal, an empty
    pipe, or, when a prompt was given, a pipe silent for :data:`WAIT_S`)."""
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):
        return None
    if os.isatty(fd):
        return None
    if prompt_given and _waits_for_writer(fd):
        ready, _, _ = select.select([fd], [], [], WAIT_S)
        if not ready:
            err.write(
                f"dsh: nothing came on stdin in {WAIT_S:g} s; going on with the prompt alone\n"
            )
            return None
    text = _text(stdin.read())
    return text if text.strip() else None


def with_piped(prompt: str | None, piped: str | None) -> str | None:
    """The prompt a run asks: the prompt, then the piped text after a blank line;
    either alone when the other is missing."""
    if piped is None:
        return prompt
    if prompt is None or not prompt.strip():
        return piped.strip() or None
    return f"{prompt}\n\n{piped.rstrip()}"
