"""The diagnostics a server pushes (``textDocument/publishDiagnostics``), kept per
file, and waiting for a report that is newer than a change.

A report is about a document version when the server says so (pylsp and most others
do); otherwise only its arrival order tells it from an older one. Both are kept: a
waiter takes the arrival number before it sends a change, and accepts the first
report that arrived later and is not about an older version.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_plugins.lsp.files import from_uri

MAX_FILES = 5000
"""Files whose diagnostics are remembered; the oldest are forgotten past this."""


@dataclass(frozen=True)
class Published:
    """One report for a file."""

    seq: int
    """Arrival order across all files."""
    version: int | None
    """The document version it is about, when the server says."""
    items: tuple[dict[str, Any], ...]


class DiagnosticsStore:
    def __init__(self) -> None:
        self._reports: dict[Path, Published] = {}
        self._seq = 0
        self._pulse = asyncio.Event()
        self._closed = False

    @property
    def seq(self) -> int:
        """The arrival number of the latest report: take it before a change, to wait
        for a report newer than the change."""
        return self._seq

    def get(self, path: Path) -> Published | None:
        return self._reports.get(path)

    def publish(self, params: Any) -> None:
        """Store a ``publishDiagnostics`` notification's report (ignored if malformed:
        it was pushed to us, there is no request to fail)."""
        if not isinstance(params, dict):
            return
        uri, items, version = params.get("uri"), params.get("diagnostics"), params.get("version")
        path = from_uri(uri) if isinstance(uri, str) else None
        if path is None or not isinstance(items, list):
            return
        self._seq += 1
        self._reports.pop(path, None)  # re-inserted last: the oldest go first
        self._reports[path] = Published(
            self._seq,
            version if isinstance(version, int) else None,
            tuple(item for item in items if isinstance(item, dict)),
        )
        if len(self._reports) > MAX_FILES:
            del self._reports[next(iter(self._reports))]
        self._wake()

    def forget(self, path: Path) -> None:
        self._reports.pop(path, None)

    def close(self) -> None:
        """No more reports will come (the server exited): waiters return now."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        pulse, self._pulse = self._pulse, asyncio.Event()
        pulse.set()

    async def wait(
        self,
        path: Path,
        *,
        after: int,
        version: int | None,
        within: float,
        quiet: float = 0.0,
    ) -> Published | None:
        """The first report for ``path`` that arrived after report ``after`` (and is
        about ``version`` or later, when the server says which), or None within
        ``within`` seconds. With ``quiet``, later reports replace it until none has come
        for ``quiet`` seconds (servers that report in stages)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        found: Published | None = None
        until = deadline
        while True:
            entry = self._reports.get(path)
            if (
                entry is not None
                and entry.seq > after
                and (entry.version is None or version is None or entry.version >= version)
            ):
                found, after = entry, entry.seq
                if quiet <= 0:
                    return found
                until = min(deadline, loop.time() + quiet)
            remaining = until - loop.time()
            if remaining <= 0 or self._closed:
                return found
            pulse = self._pulse
            try:
                async with asyncio.timeout(remaining):
                    await pulse.wait()
            except TimeoutError:
                return found
