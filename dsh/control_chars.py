"""Text from the model, tools, files, command output or a stored session, made safe
to show on a terminal.

A terminal obeys the control characters in what it is given: ``ESC ] 52`` writes
the clipboard, ``ESC ] 0`` sets the window title, ``ESC [ 2J`` clears the screen,
``ESC [ ? 1049 h`` switches screens, and the 8-bit C1 controls (U+0080-U+009F) do the
same without an ESC in some terminals. None of that may come from text dsh did not
write itself, so every surface that shows such text to a person (the TUI, plain
mode, ``dsh -p`` on a terminal, stderr notes, ``dsh sessions show``, the Markdown
export, the terminal title) passes it through :func:`visible` first: one function,
so every surface shows the same thing.

:func:`visible` keeps newlines and tabs and shows every other control character as
a visible picture instead: ESC as ``␛`` (so ``ESC ] 52`` reads ``␛]52``), other C0
controls as their Control Pictures (``␇`` for BEL), DEL as ``␡``, a C1 control as
``␛`` and its 7-bit twin (U+009B as ``␛[``), the bidirectional overrides and
isolates that can make a command read differently from what it does as
``<U+202E>``, and a lone surrogate (which no UTF-8 stream can encode) as U+FFFD.
``\\r\\n`` becomes ``\\n``; a lone ``\\r`` (which would let later text overwrite
earlier text on the same line) shows as ``␍``. It is idempotent: what it returns
passes through it unchanged.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TextIO, cast

__all__ = [
    "VisibleStream",
    "escape_in_json",
    "is_terminal",
    "is_visible",
    "printable",
    "visible",
]

_UNSAFE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
_UNSAFE_IN_LINE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    # Compiled on first use: these take a millisecond each, and most runs of a
    # short command never show a character that needs them.
    return re.compile(source)


@functools.cache
def _pictures() -> dict[int, str]:
    table = {code: chr(0x2400 + code) for code in range(0x20)}  # ␀ … ␟, ␛ for ESC
    table[0x7F] = "\u2421"  # ␡
    table.update({code: "\u241b" + chr(code - 0x40) for code in range(0x80, 0xA0)})
    for code in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)):
        table[code] = f"<U+{code:04X}>"
    return table


def _picture(match: re.Match[str]) -> str:
    return _pictures().get(ord(match.group()), "\ufffd")


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` with nothing a terminal would obey: see the module's docs.
    ``one_line`` is for a name shown inside a line (a path, a settings key): its
    newlines and tabs (and U+2028, U+2029) show as pictures too."""
    unsafe = _pattern(_UNSAFE_IN_LINE if one_line else _UNSAFE)
    if unsafe.search(text) is None:
        return text
    if not one_line and "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return unsafe.sub(_picture, text)


def is_visible(text: str) -> bool:
    """True when :func:`visible` would return ``text`` unchanged."""
    return _pattern(_UNSAFE).search(text) is None


def printable(text: str) -> str:
    """``text`` with each lone surrogate (half an emoji cut by a provider, say) as
    U+FFFD and nothing else changed: for output that must stay byte-exact (``dsh -p``
    into a pipe or a file), where UTF-8 cannot encode a lone surrogate and one would
    fail the whole write."""
    return _pattern("[\ud800-\udfff]").sub("\ufffd", text)


_RAW_IN_JSON = "[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_in_json(text: str) -> str:
    """JSON ``text`` with what an encoder leaves raw but a terminal showing the line
    could obey (DEL, the C1 controls, U+2028, U+2029, the bidi overrides), and lone
    surrogates (which UTF-8 cannot encode), written as ``\\uXXXX`` escapes: the same
    JSON value, safe to print. (JSON escapes the C0 controls itself.)"""
    pattern = _pattern(_RAW_IN_JSON)
    if pattern.search(text) is None:
        return text
    return pattern.sub(_json_escape, text)


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for a closed, fake or odd stream): what
    decides between pictures for a person and exact bytes for a program."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class VisibleStream:
    """A text stream that writes everything through :func:`visible` into another:
    dsh puts one in front of stderr, so every note there (whichever code wrote it,
    whatever it quotes) is safe on a terminal.

    ``isatty()`` says False: nothing written here can control a terminal, so a writer
    that would colour its output when it sees one (rich) writes plain text instead.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    @classmethod
    def around(cls, stream: TextIO) -> TextIO:
        """``stream`` behind a :class:`VisibleStream` (only one, however often called)."""
        if isinstance(stream, VisibleStream):
            return cast(TextIO, stream)
        return cast(TextIO, cls(stream))

    def write(self, text: str) -> int:
        self.stream.write(visible(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
