"""A command file's prompt with what was typed after the command.

``$ARGUMENTS`` is the whole text after the name, ``$1`` to ``$9`` its words (quoted
words as the shell reads them); a prompt with no placeholder gets the text added at
its end. A line ``!COMMAND`` (or ``!`COMMAND``` anywhere in a line) runs COMMAND
with the ``bash`` tool, through the same permission check and approval any of the
model's calls goes through, and is replaced by what it printed. ``@path`` mentions
are left as written: the prompt goes out as the person's own message, whose
mentions are attached as any are.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable

PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")
BANG_LINE = re.compile(r"^!(?!`)\s*(\S.*)$", re.M)
BANG_INLINE = re.compile(r"!`([^`\n]+)`")

Run = Callable[[str], Awaitable[str]]
"""Runs one command line; what it printed (or why it did not run)."""


def arguments(template: str, args: str) -> str:
    """``template`` with ``$ARGUMENTS`` and ``$1``…``$9`` filled in from ``args``."""
    try:
        words = shlex.split(args)
    except ValueError:  # an unclosed quote: words as typed
        words = args.split()
    if PLACEHOLDER.search(template) is None:
        return f"{template}\n\n{args}" if args.strip() else template

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return args
        index = int(key) - 1
        return words[index] if index < len(words) else ""

    return PLACEHOLDER.sub(fill, template)


async def commands(text: str, run: Run) -> str:
    """``text`` with each ``!`` line and ``!`…``` replaced by what its command printed,
    in order (one at a time: each may be asked about)."""
    out: list[str] = []
    position = 0
    for match in _bangs(text):
        out.append(text[position : match.start()])
        command = match.group(1).strip()
        printed = (await run(command)).rstrip("\n")
        if match.re is BANG_LINE:
            out.append(f"$ {command}\n{printed}" if printed else f"$ {command}")
        else:
            out.append(printed)
        position = match.end()
    out.append(text[position:])
    return "".join(out)


def _bangs(text: str) -> list[re.Match[str]]:
    found = [*BANG_LINE.finditer(text), *BANG_INLINE.finditer(text)]
    found.sort(key=lambda match: match.start())
    kept: list[re.Match[str]] = []
    for match in found:  # an inline one inside a `!` line is that line's business
        if kept and match.start() < kept[-1].end():
            continue
        kept.append(match)
    return kept
