"""What typing into a terminal will run.

A terminal that runs a shell runs each line the model completes with Enter, so what is
typed there is judged as a bash command: the line typed so far (kept per terminal)
plus this call's text, up to its last Enter. Keys that move the cursor, complete or
recall history change the line in ways not followed here: the command is then
unknown, and always asked about. Keys that can run the line without Enter (``C-o``,
``C-x C-e``, Meta bindings) make it unknown too, Enter or not. Whether a line read as
written runs what it reads in that shell is :mod:`dsh_plugins.terminal.meaning`'s question.
"""

from __future__ import annotations

from dataclasses import dataclass

_KILL_LINE = {"\x03", "\x15"}  # C-c, C-u: the line is dropped
_ERASE = {"\x7f", "\x08"}
# Keys that can run the line without Enter under readline's own bindings (terminals
# read no ~/.inputrc): C-o (operate-and-get-next), C-x (C-x C-e edits and runs it),
# and Esc before anything but a cursor key's sequence (Meta bindings, such as M-#).
_RUNS_LINE = {"\x0f": "C-o", "\x18": "C-x"}
RUNS_WITHOUT_ENTER = "keys that can run the line without Enter"


@dataclass(frozen=True)
class Typed:
    command: str | None
    """The lines Enter completes, as one script; None when nothing is run."""
    rest: str | None
    """The line left open afterwards; None when keys edited it unknowably."""
    unknown: str | None = None
    """Why the command cannot be known, when it cannot."""


def typed(line: str | None, data: str) -> Typed:
    """What typing ``data`` runs in a shell whose open line is ``line`` (None: unknown)."""
    current = line
    completed: list[str] = []
    unknown: str | None = None
    for index, char in enumerate(data):
        runs = _RUNS_LINE.get(char)
        if runs is None and char == "\x1b" and data[index + 1 : index + 2] not in ("[", "O"):
            runs = "Esc"
        if runs is not None:
            # What runs is the line as edited so far: not known here, and never vouched for.
            unknown = unknown or f"{RUNS_WITHOUT_ENTER} ({runs})"
            current = None
            continue
        if char in "\r\n":
            if current is None:
                unknown = unknown or "keys edited the command line before Enter"
            else:
                completed.append(current)
            current = ""
        elif char in _KILL_LINE:
            current = ""
        elif char in _ERASE:
            current = current[:-1] if current else current
        elif char == "\t" or char == "\x1b" or ord(char) < 0x20 or char == "\x9b":
            current = None  # completion, cursor keys, history: the line is not known
        elif current is not None:
            current += char
    if unknown is not None:
        return Typed("\n".join(completed) or "", current, unknown)
    return Typed("\n".join(completed) if completed else None, current)
