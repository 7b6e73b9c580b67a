"""The persistence seam: what every storage backend for session logs provides.

A backend stores a header and an append-only list of events per session. ``append``
is durable when it returns. ``load`` repairs what a crash left behind and writes the
repair; ``inspect`` returns the same repaired view without writing. Both report what
they repaired or could not read as :class:`LoadIssue` values, never silently.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from dsh.llm import SessionId
from dsh.session.events import SessionEvent
from dsh.session.header import FORMAT_VERSION, SessionHeader
from dsh.session.payloads import Corrupt
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


class LogLostError(PersistenceError):
    """The stored log (a JSONL file, the SQLite database) was deleted, truncated or
    replaced under the process writing it: appending would write into nothing, or
    after a hole, so nothing is appended. ``what`` names the file to the person
    ("the session log X")."""

    @classmethod
    def deleted(cls, what: str) -> LogLostError:
        return cls(f"{what} was deleted while dsh was writing it")

    @classmethod
    def replaced(cls, what: str) -> LogLostError:
        return cls(f"{what} was replaced by another file while dsh was writing it")

    @classmethod
    def truncated(cls, what: str, left: str) -> LogLostError:
        """``left``: how much of it is left, in the backend's words."""
        return cls(f"{what} was truncated while dsh was writing it ({left})")


IssueKind = Literal["torn-tail", "corrupt-line", "corrupt-header", "interrupted-turn"]


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

    def forget(self, session_id: SessionId) -> None:
        """Drop what is kept in memory of a session no longer open here (its line
        index, its next seq): a long day opens hundreds. Appending to it again follows
        a load."""

    async def close(self) -> None: ...


def read_header(raw: Any, where: str) -> SessionHeader:
    """A stored header (the decoded JSON object) as a :class:`SessionHeader`: a foreign
    format version refuses, anything else malformed is corruption, both naming ``where``."""
    if not isinstance(raw, dict):
        raise CorruptSessionError(f"{where}: the header is not a JSON object")
    _check_version(raw, where)
    try:
        return SessionHeader.model_validate(raw)
    except ValidationError as error:
        raise CorruptSessionError(f"{where}: bad header: {error}") from None


def _check_version(raw: dict[str, Any], where: str) -> None:
    version = raw.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise FormatUnsupportedError(
            f"{where}: session format version {version!r} is not supported "
            f"(this dsh reads version {FORMAT_VERSION}); upgrade dsh to open it"
        )


# One top-level field of a JSON object whose value is a plain one (a header has no
# other kind), for reading fields around damage that makes the whole unparseable.
_FIELD = re.compile(r'"(\w+)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+|null|true|false)')


def legible_fields(data: bytes) -> dict[str, Any]:
    """The fields of a damaged JSON object that can still be read: all of them when
    it parses once undecodable bytes are replaced, else each whose value is intact.
    A text holding a replaced byte is dropped: its value is not known."""
    text = data.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    fields: dict[str, Any] = {}
    if isinstance(parsed, dict):
        fields = parsed
    else:
        for match in _FIELD.finditer(text):
            try:
                fields.setdefault(match[1], json.loads(match[2]))
            except ValueError:
                continue
    return {k: v for k, v in fields.items() if not (isinstance(v, str) and "\ufffd" in v)}


def salvage_header(
    data: bytes,
    where: str,
    *,
    problem: str,
    session_id: str,
    created_at: int,
    cwd: str | None = None,
    cwd_fits: Callable[[str], bool] | None = None,
) -> tuple[SessionHeader, LoadIssue]:
    """A header for a session whose stored header is damaged: what can be read of
    ``data`` (the damaged header), over what storage knows without it (``session_id``,
    where the log lives; ``created_at`` and ``cwd``, from the log or its row), and the
    issue that says so. The id always comes from storage, which files the log by it;
    a legible folder counts only if ``cwd_fits`` it (the place the log is filed in).
    A format version that can be read and is foreign still refuses."""
    fields = legible_fields(data)
    _check_version(fields, where)
    known: dict[str, Any] = {"id": session_id, "createdAt": created_at, "cwd": cwd}
    header = SessionHeader.model_validate(known)
    for key, value in fields.items():
        if key in ("type", "id", "version") or (key == "cwd" and cwd is not None):
            continue
        if key == "cwd" and isinstance(value, str) and cwd_fits is not None and not cwd_fits(value):
            continue
        try:
            header = SessionHeader.model_validate({**header.to_dict(), key: value})
        except ValidationError:
            continue  # this field is lost with the damage; the others still count
    folder = header.cwd if header.cwd is not None else "unknown"
    detail = (
        f"damaged session header ({problem}); read what was legible: id {header.id}, "
        f"folder {folder}, created at {header.created_at}"
    )
    return header, LoadIssue("corrupt-header", where, None, detail)


MIN_EVENT_BYTES = 5
"""The fewest bytes one event takes in a stored record: a piece of a packed run of
chunks (an empty text and its time gap, ``"",0,``). A log holds at most its size over
this many events, so no seq beyond that is believed."""


@dataclass
class _Stored:
    """One stored record as read: its events, or why it could not be read."""

    place: int  # its line (JSONL) or row (SQLite), from 1
    size: int  # in bytes
    events: builtins.list[SessionEvent] | None
    error: str = ""


@dataclass
class Reader:
    """Collects the stored records of a log in order, then places their events by seq:
    a gap left by records that could not be read is filled with ``session/corrupt``
    placeholders, so that seq stays equal to the index.

    A seq is believed only where it fits the log: a gap must be one the unreadable
    records before it could have held, or one the next record confirms (lines lost
    from the file), and within what a log of this size could hold
    (:data:`MIN_EVENT_BYTES`). A record whose seq does not fit is not read (it costs
    itself), so a forged seq costs memory and time in proportion to the log's real
    size, never to the number it names."""

    location: str
    issues: builtins.list[LoadIssue] = field(default_factory=list)
    _records: builtins.list[_Stored] = field(default_factory=list)

    def read(self, place: int, size: int, events: builtins.list[SessionEvent]) -> None:
        """A record that was read: ``events`` (one, or a packed run), in order."""
        if events:
            self._records.append(_Stored(place, size, events))

    def unreadable(self, place: int, size: int, error: str) -> None:
        self._records.append(_Stored(place, size, None, error))
        self._skipped(place, error)

    def _skipped(self, place: int, error: str) -> None:
        self.issues.append(
            LoadIssue("corrupt-line", self.location, place, f"unreadable record skipped: {error}")
        )
        _log.warning("%s:%d: unreadable record skipped: %s", self.location, place, error)

    def torn(self, line: int, error: str) -> None:
        self.issues.append(
            LoadIssue("torn-tail", self.location, line, f"incomplete last record dropped: {error}")
        )
        _log.warning("%s:%d: incomplete last record dropped: %s", self.location, line, error)

    def note(self, issue: LoadIssue) -> None:
        self.issues.append(issue)

    def first_time(self) -> int | None:
        """The time of the first event read so far, if any."""
        for record in self._records:
            if record.events:
                return record.events[0].time
        return None

    def finish(self, header: SessionHeader) -> LoadedSession:
        events = self._place()
        repaired = closing_events(events)
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
        return LoadedSession(header, events + repaired, self.issues, repaired)

    def _place(self) -> builtins.list[SessionEvent]:
        records = self._records
        capacity = sum(record.size for record in records) // MIN_EVENT_BYTES
        # For each record, the first seq of the next readable one (None: none follows),
        # and how many events the readable records after it hold.
        following: builtins.list[int | None] = [None] * len(records)
        after = [0] * len(records)
        upcoming: int | None = None
        held = 0
        for i in range(len(records) - 1, -1, -1):
            following[i], after[i] = upcoming, held
            found = records[i].events
            if found is not None:
                upcoming = found[0].seq
                held += len(found)
        events: builtins.list[SessionEvent] = []
        damage: builtins.list[_Stored] = []  # not read since the last record placed
        for i, record in enumerate(records):
            found = record.events
            if found is None:
                damage.append(record)
                continue
            expected = len(events)
            first, last = found[0].seq, found[-1].seq
            if first < expected:
                doubt = f"seq {first} repeats or goes back (expected {expected})"
            elif first > expected and not _gap_believed(
                first - expected, last, damage, capacity - after[i], following[i]
            ):
                doubt = f"seq {first} does not fit its place in the log (expected {expected})"
            else:
                doubt = ""
            if doubt:
                record.error = doubt
                self._skipped(record.place, doubt)
                damage.append(record)
                continue
            if first > expected:
                cause = damage[-1] if damage else None
                place = cause.place if cause is not None else record.place
                error = cause.error if cause is not None else "missing from the log"
                stamp = events[-1].time if events else found[0].time
                lost = Corrupt(line=place, error=error)
                events.extend(
                    SessionEvent("session/corrupt", seq, stamp, lost)
                    for seq in range(expected, first)
                )
            events.extend(found)
            damage.clear()
        return events


def _gap_believed(
    gap: int, last: int, damage: Sequence[_Stored], capacity: int, following: int | None
) -> bool:
    """Whether a record whose seq leaves ``gap`` events unaccounted for is where its seq
    says: the records not read just before it could have held them, or nothing but
    lost lines explains it (the next record goes on from it). Either way its last seq
    must leave room (``capacity``: what the log's size allows, less the events read
    after it), so the events made never outnumber what the log could hold."""
    if last >= capacity:
        return False
    if gap <= sum(max(1, record.size // MIN_EVENT_BYTES) for record in damage):
        return True
    return following is None or following == last + 1
