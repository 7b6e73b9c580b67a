"""The persistence seam: what every storage backend for session logs provides.

A backend stores a header and an append-only list of events per session. ``append``
is durable when it returns. ``load`` repairs what a crash left behind and writes the
repair; ``inspect`` returns the same repaired view without writing. Both report what
they repaired or could not read as :class:`LoadIssue` values, never silently.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from dsh.llm import SessionId
from dsh.session.events import Corrupt, SessionEvent
from dsh.session.header import FORMAT_VERSION, SessionHeader
from dsh.session.repair import closing_events

_log = logging.getLogger("dsh.session")


class PersistenceError(Exception):
    """Base of every storage failure."""


class SessionNotFoundError(PersistenceError, LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no stored session {session_id!r}")
        self.session_id = session_id


class FormatUnsupportedError(PersistenceError):
    """The stored session was written in a format this version cannot read."""


class CorruptSessionError(PersistenceError):
    """The stored session cannot be read at all (its header is damaged)."""


class SeqMismatchError(PersistenceError):
    """An append does not continue the stored log at its next seq."""


IssueKind = Literal["torn-tail", "corrupt-line", "interrupted-turn"]


@dataclass(frozen=True)
class LoadIssue:
    kind: IssueKind
    location: str
    line: int | None
    detail: str

    def __str__(self) -> str:
        where = f"{self.location}:{self.line}" if self.line is not None else self.location
        return f"{where}: {self.detail}"


@dataclass
class LoadedSession:
    header: SessionHeader
    events: builtins.list[SessionEvent]
    issues: builtins.list[LoadIssue] = field(default_factory=list)
    repaired: builtins.list[SessionEvent] = field(default_factory=list)
    """The closing events crash repair added at the end of ``events``."""


class SessionPersistence(Protocol):
    name: str

    async def create(self, header: SessionHeader) -> None:
        """Announce a new session. Writes nothing until its first append."""

    async def append(
        self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
    ) -> None:
        """Store ``events``; the first must be the session's next seq. Once this returns
        they survive the process being killed; with ``sync`` they also survive the
        machine going down (an fsync). A backend may always sync."""

    async def sync(self, session_id: SessionId) -> None:
        """Make every event appended so far survive the machine going down."""

    async def load(self, session_id: SessionId) -> LoadedSession:
        """Read a session, repairing (and writing the repair of) crash damage."""

    async def inspect(self, session_id: SessionId) -> LoadedSession:
        """Read a session with the same repairs, in memory only."""

    async def list(self, cwd: str | None = None) -> builtins.list[SessionHeader]:
        """Every stored session's header (only ``cwd``'s when given)."""

    async def exists(self, session_id: SessionId) -> bool:
        """Whether a session is stored (or created here and not yet written)."""

    async def delete(self, session_id: SessionId) -> bool:
        """Remove a stored session; False if there was none."""

    def location(self, session_id: SessionId) -> str | None:
        """Where the session is stored (a path), for messages and the catalog."""

    def log_path(self, header: SessionHeader) -> Path:
        """The file the session's events are (or will be) written to: its own JSONL
        log, or the database that holds every session."""

    def blob_dir(self, header: SessionHeader) -> Path:
        """The folder beside the log that holds the session's blobs
        (:mod:`dsh.session.blobs`)."""

    async def close(self) -> None: ...


def read_header(raw: Any, where: str) -> SessionHeader:
    """A stored header (the decoded JSON object) as a :class:`SessionHeader`: a foreign
    format version refuses, anything else malformed is corruption, both naming ``where``."""
    if not isinstance(raw, dict):
        raise CorruptSessionError(f"{where}: the header is not a JSON object")
    version = raw.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise FormatUnsupportedError(
            f"{where}: session format version {version!r} is not supported "
            f"(this dsh reads version {FORMAT_VERSION}); upgrade dsh to open it"
        )
    try:
        return SessionHeader.model_validate(raw)
    except ValidationError as error:
        raise CorruptSessionError(f"{where}: bad header: {error}") from None


@dataclass
class Reader:
    """Collects parsed events in order, filling seq gaps left by unreadable records
    with ``session/corrupt`` placeholders so that seq stays equal to the index."""

    location: str
    events: builtins.list[SessionEvent] = field(default_factory=list)
    issues: builtins.list[LoadIssue] = field(default_factory=list)
    _unreadable: builtins.list[tuple[int, str]] = field(default_factory=list)

    def unreadable(self, line: int, error: str) -> None:
        self._unreadable.append((line, error))
        self.issues.append(
            LoadIssue("corrupt-line", self.location, line, f"unreadable record skipped: {error}")
        )
        _log.warning("%s:%d: unreadable record skipped: %s", self.location, line, error)

    def add(self, event: SessionEvent, line: int) -> None:
        expected = len(self.events)
        if event.seq < expected:
            self.unreadable(line, f"seq {event.seq} repeats or goes back (expected {expected})")
            return
        if event.seq > expected:
            lost_line, error = self._unreadable[-1] if self._unreadable else (line, "missing")
            stamp = self.events[-1].time if self.events else event.time
            for seq in range(expected, event.seq):
                self.events.append(
                    SessionEvent(
                        "session/corrupt", seq, stamp, Corrupt(line=lost_line, error=error)
                    )
                )
        self.events.append(event)

    def torn(self, line: int, error: str) -> None:
        self.issues.append(
            LoadIssue("torn-tail", self.location, line, f"incomplete last record dropped: {error}")
        )
        _log.warning("%s:%d: incomplete last record dropped: %s", self.location, line, error)

    def finish(self, header: SessionHeader) -> LoadedSession:
        repaired = closing_events(self.events)
        if repaired:
            turn = next(e.data.turn for e in reversed(repaired) if e.type == "turn/end")
            self.issues.append(
                LoadIssue(
                    "interrupted-turn",
                    self.location,
                    None,
                    f"turn {turn} was open when dsh stopped; closed it as interrupted",
                )
            )
        return LoadedSession(header, self.events + repaired, self.issues, repaired)
