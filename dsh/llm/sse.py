"""Server-sent events: lines in, event data out.

Only what model APIs use: ``data:`` fields (joined with newlines when an event has
several), comments (lines starting with ``:``, sent as keep-alives), and the blank
line that ends an event. Other fields (``event``, ``id``, ``retry``) are ignored.

:class:`SseLines` cuts the body into lines as SSE does: at CRLF, LF or CR only.
(``str.splitlines``, and HTTP clients that use it, also cut at U+2028, U+0085 and
other characters a JSON string may hold unescaped, which would tear an event apart.)
"""

from __future__ import annotations

import codecs
import re

_LINE_END = re.compile(r"\r\n|\r|\n")


class SseLines:
    """Bytes in (split anywhere, even inside a character), SSE lines out (UTF-8)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pieces: list[str] = []  # the line begun and not yet ended
        self._cr = False  # a CR ended the last piece: a LF may follow it

    def feed(self, data: bytes) -> list[str]:
        """The lines ``data`` completes, without their line ends."""
        return self._split(self._decoder.decode(data), final=False)

    def end(self) -> list[str]:
        """The lines left when the body ends (the last may have no line end)."""
        return self._split(self._decoder.decode(b"", final=True), final=True)

    def _split(self, text: str, *, final: bool) -> list[str]:
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r") and not final:
            text, self._cr = text[:-1], True  # decided by the next piece
        *ended, rest = _LINE_END.split(text)
        lines = []
        if ended:
            lines = ["".join(self._pieces) + ended[0], *ended[1:]]
            self._pieces = []
        if rest:
            self._pieces.append(rest)
        if final and self._pieces:
            lines.append("".join(self._pieces))
            self._pieces = []
        return lines


class SseParser:
    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """Take one line (without its line ending); return an event's data when the
        line ends one."""
        if not line:
            if not self._data:
                return None
            data = "\n".join(self._data)
            self._data.clear()
            return data
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def end(self) -> str | None:
        """Data left without its closing blank line when the stream ended."""
        return self.feed("")
