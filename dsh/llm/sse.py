"""Server-sent events: lines in, event data out.

Only what model APIs use: ``data:`` fields (joined with newlines when an event has
several), comments (lines starting with ``:``, sent as keep-alives), and the blank
line that ends an event. Other fields (``event``, ``id``, ``retry``) are ignored.
"""

from __future__ import annotations


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
