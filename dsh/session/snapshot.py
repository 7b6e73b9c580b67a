"""Resuming without reading the whole log: a derived snapshot beside it, and the log's
older events read on demand.

A JSONL log is indexed by line as it is written and read (:class:`LineIndex`: each
record's first seq and byte offset). At a turn's end the store writes, beside the log,
``snapshot.json`` (what :class:`~dsh.session.session.Session` derives from the log:
its surface, rewinds, open turn, latest request header and context, the seqs of every
event but the streamed chunks by type) and ``snapshot.lines`` (the line index, as
two arrays of 64-bit integers). Both are derived: deleting them costs one full read.

The snapshot is keyed by what it covers: the log's size then, a hash of its header
line and of its last record, and the registered event vocabulary (a plugin's types
read opaque without it, so a plugin set change derives differently). Opening a log
whose snapshot fits reads the header, the snapshot and only the records after it
(the tail); an :class:`EventLog` then stands for the whole log, reading an older
record from the file only when something asks for it. Anything that does not fit
(a missing, damaged or foreign snapshot, a log shorter than it or whose last
covered record differs, a tail that is not clean) is the full read, never a guess.
"""

from __future__ import annotations

import array
import bisect
import hashlib
import json
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from dsh.paths import PRIVATE_FILE
from dsh.session.events import EventFormatError, SessionEvent, event_type, registered_event_types
from dsh.session.records import decode

SNAPSHOT_VERSION = 1
SNAPSHOT_FILE = "snapshot.json"
LINES_FILE = "snapshot.lines"
CACHED_LINES = 4096
"""Records of the older log kept decoded once read (a screenful of paging, the
messages of the next request): a bounded cache, so reading old events never holds
the whole log."""

# The start of every stored record: the event's own (``"seq"``) or a packed run's
# first (``"seq0"``), written in this order by SessionEvent.to_json and records._pack.
_RECORD_START = re.compile(rb'\{"type":"(?:[^"\\]|\\.)*","seq0?":(\d+),')


class SnapshotMismatch(Exception):
    """The snapshot does not describe this log: read it whole."""


def vocabulary() -> str:
    """A digest of the registered event types and their payload models: logs derive
    the same only under the same vocabulary."""
    names = []
    for name in sorted(registered_event_types()):
        spec = event_type(name)
        model = spec.model if spec is not None else None
        where = f"{model.__module__}.{model.__qualname__}" if model is not None else "?"
        names.append(f"{name}={where}")
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


@dataclass
class LineIndex:
    """Where each stored record of a log starts: its first event's seq and its byte
    offset (the header line is not a record)."""

    seqs: array.array[int] = field(default_factory=lambda: array.array("q"))
    offsets: array.array[int] = field(default_factory=lambda: array.array("q"))
    last_line: bytes = b""
    """The last record, its newline included: what the snapshot's hash covers."""
    header_line: bytes = b""
    """The log's header line, its newline included."""

    def add(self, data: bytes, at: int) -> bool:
        """Index the records of ``data`` (whole lines), written at byte ``at``. False
        when one does not start as dsh writes records (nothing is indexed then)."""
        seqs, offsets = array.array("q"), array.array("q")
        start = 0
        last = b""
        while start < len(data):
            end = data.find(b"\n", start)
            if end < 0:
                return False
            found = _RECORD_START.match(data, start, min(end, start + 200))
            if found is None:
                return False
            seqs.append(int(found.group(1)))
            offsets.append(at + start)
            last = data[start : end + 1]
            start = end + 1
        self.seqs.extend(seqs)
        self.offsets.extend(offsets)
        if last:
            self.last_line = last
        return True

    def to_bytes(self) -> bytes:
        return self.seqs.tobytes() + self.offsets.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, lines: int) -> LineIndex:
        if len(data) != 16 * lines:
            raise SnapshotMismatch("the line index does not match the snapshot")
        index = cls()
        index.seqs.frombytes(data[: 8 * lines])
        index.offsets.frombytes(data[8 * lines :])
        return index


@dataclass(frozen=True)
class Snapshot:
    """What a session derives from the first ``next_seq`` events of its log, which
    take its first ``log_size`` bytes (``lines`` records)."""

    next_seq: int
    log_size: int
    lines: int
    header_hash: str
    last_hash: str
    vocabulary: str
    state: dict[str, Any]
    """The session's own derived state (:meth:`Session.derived_state`)."""
    lines_hash: str = ""
    """The digest of the line index's file, written with it."""

    def to_bytes(self) -> bytes:
        """The file's content: a digest of the JSON on the first line, then the JSON,
        so that a damaged byte anywhere is found rather than believed."""
        body = self.to_json().encode()
        return digest(body).encode() + b"\n" + body

    @classmethod
    def from_bytes(cls, data: bytes) -> Snapshot:
        check, _, body = data.partition(b"\n")
        if digest(body).encode() != check:
            raise SnapshotMismatch("a damaged snapshot")
        return cls.from_json(body)

    def to_json(self) -> str:
        return json.dumps(
            {
                "linesHash": self.lines_hash,
                "version": SNAPSHOT_VERSION,
                "nextSeq": self.next_seq,
                "logSize": self.log_size,
                "lines": self.lines,
                "headerHash": self.header_hash,
                "lastHash": self.last_hash,
                "vocabulary": self.vocabulary,
                "state": self.state,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: bytes) -> Snapshot:
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or raw.get("version") != SNAPSHOT_VERSION:
                raise SnapshotMismatch("a snapshot of another version")
            snapshot = cls(
                next_seq=_int(raw["nextSeq"]),
                log_size=_int(raw["logSize"]),
                lines=_int(raw["lines"]),
                header_hash=str(raw["headerHash"]),
                last_hash=str(raw["lastHash"]),
                vocabulary=str(raw["vocabulary"]),
                state=raw["state"],
                lines_hash=str(raw["linesHash"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise SnapshotMismatch(f"an unreadable snapshot: {error}") from None
        if not isinstance(snapshot.state, dict):
            raise SnapshotMismatch("an unreadable snapshot: no state")
        return snapshot


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def write_snapshot(folder: Path, snapshot: Snapshot, index: LineIndex) -> None:
    """Write both files, each whole or not at all (a reader checks that they agree)."""
    lines = index.to_bytes()
    _replace(folder / LINES_FILE, lines)
    _replace(folder / SNAPSHOT_FILE, replace(snapshot, lines_hash=digest(lines)).to_bytes())


def _replace(path: Path, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".snap-")
    try:
        os.fchmod(fd, PRIVATE_FILE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def remove_snapshot(folder: Path) -> None:
    for name in (SNAPSHOT_FILE, LINES_FILE):
        (folder / name).unlink(missing_ok=True)


@dataclass
class Opened:
    """A log opened through its snapshot: the snapshot, the line index of what it
    covers (the tail's records added), and the tail's events."""

    snapshot: Snapshot
    index: LineIndex
    tail: list[SessionEvent]
    size: int
    """The log's size as read: where the next append goes."""
    identity: tuple[int, int]


def open_with_snapshot(path: Path, header_line: bytes, *, any_vocabulary: bool = False) -> Opened:
    """Read the log at ``path`` through the snapshot beside it: the snapshot checked
    against the log, then the records after it. Raises :class:`SnapshotMismatch`.
    ``any_vocabulary``: take a snapshot written under other event types (a preview
    shown before the plugins load, and replaced once they have)."""
    folder = path.parent
    try:
        snapshot = Snapshot.from_bytes((folder / SNAPSHOT_FILE).read_bytes())
        lines = (folder / LINES_FILE).read_bytes()
    except OSError as error:  # none (the usual case for an old log), or unreadable
        raise SnapshotMismatch(f"no snapshot ({error.strerror})") from None
    if digest(lines) != snapshot.lines_hash:
        raise SnapshotMismatch("the line index is not the one written with the snapshot")
    if snapshot.vocabulary != vocabulary() and not any_vocabulary:
        raise SnapshotMismatch("the registered event types changed")
    if snapshot.header_hash != digest(header_line):
        raise SnapshotMismatch("the header changed")
    index = LineIndex.from_bytes(lines, snapshot.lines)
    with open(path, "rb") as handle:
        status = os.fstat(handle.fileno())
        if status.st_size < snapshot.log_size or not snapshot.lines:
            raise SnapshotMismatch("the log is shorter than its snapshot")
        last_at = index.offsets[-1]
        handle.seek(last_at)
        covered_last = handle.read(snapshot.log_size - last_at)
        tail_bytes = handle.read()
    if digest(covered_last) != snapshot.last_hash or not covered_last.endswith(b"\n"):
        raise SnapshotMismatch("the log's last covered record differs")
    index.last_line = covered_last
    tail: list[SessionEvent] = []
    if tail_bytes:
        if not tail_bytes.endswith(b"\n"):
            raise SnapshotMismatch("the log ends in a torn record")
        if not index.add(tail_bytes, snapshot.log_size):
            raise SnapshotMismatch("the tail holds a record dsh did not write")
        expected = snapshot.next_seq
        for line in tail_bytes.splitlines():
            try:
                events = decode(json.loads(line))
            except (ValueError, ValidationError, EventFormatError):
                raise SnapshotMismatch("the tail holds an unreadable record") from None
            for event in events:
                if event.seq != expected:
                    raise SnapshotMismatch("the tail's seqs do not follow the snapshot")
                expected += 1
            tail.extend(events)
    return Opened(snapshot, index, tail, status.st_size, (status.st_dev, status.st_ino))


class OlderRecords:
    """The covered part of a log, read a record at a time from the file when asked."""

    def __init__(self, path: Path, index: LineIndex, end_seq: int, end_offset: int) -> None:
        self.path = path
        # The index itself, not a copy (it goes on growing as the log does): only its
        # first ``lines`` records are the covered part's.
        self.seqs = index.seqs
        self.offsets = index.offsets
        self.lines = bisect.bisect_left(index.seqs, end_seq)
        self.end_seq = end_seq
        self.end_offset = end_offset
        self._cache: OrderedDict[int, list[SessionEvent]] = OrderedDict()
        self.reads = 0
        """Records decoded so far (for tests and benchmarks: what a resume read)."""

    def __len__(self) -> int:
        return self.end_seq

    def _line_of(self, seq: int) -> int:
        return bisect.bisect_right(self.seqs, seq, 0, self.lines) - 1

    def _end_of(self, line: int) -> int:
        """Where record ``line`` ends (the next one's offset)."""
        return self.offsets[line + 1] if line + 1 < self.lines else self.end_offset

    def get(self, seq: int) -> SessionEvent:
        line = self._line_of(seq)
        events = self._cache.get(line)
        if events is None:
            self._load(line, line + 1)
            events = self._cache[line]
        else:
            self._cache.move_to_end(line)
        return events[seq - self.seqs[line]]

    def many(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The events at ``seqs`` (scattered: a history's messages, the events of a few
        types), each record read once, through one open file."""
        lines = {seq: self._line_of(seq) for seq in seqs}
        found = {line: self._cache[line] for line in set(lines.values()) if line in self._cache}
        wanted = sorted(set(lines.values()) - found.keys())
        if wanted:
            with open(self.path, "rb") as handle:
                for line in wanted:
                    begin = self.offsets[line]
                    size = self._end_of(line) - begin
                    found[line] = self._keep(line, os.pread(handle.fileno(), size, begin))
        return [found[lines[seq]][seq - self.seqs[lines[seq]]] for seq in seqs]

    def _keep(self, line: int, data: bytes) -> list[SessionEvent]:
        events = decode(json.loads(data))
        self._cache[line] = events
        self._cache.move_to_end(line)
        self.reads += 1
        if len(self._cache) > CACHED_LINES:
            self._cache.popitem(last=False)
        return events

    def range(self, start: int, stop: int) -> list[SessionEvent]:
        """Events ``start`` to ``stop - 1`` (both within the covered part), in order."""
        if start >= stop:
            return []
        first, last = self._line_of(start), self._line_of(stop - 1)
        missing = [n for n in range(first, last + 1) if n not in self._cache]
        if missing:
            self._load(missing[0], missing[-1] + 1)
        out: list[SessionEvent] = []
        for line in range(first, last + 1):
            events = self._cache.get(line)
            if events is None:  # pushed out by a range wider than the cache
                self._load(line, line + 1)
                events = self._cache[line]
            out.extend(events)
        base = self.seqs[first]
        return out[start - base : stop - base]

    def _load(self, first: int, stop: int) -> None:
        begin = self.offsets[first]
        end = self._end_of(stop - 1)
        with open(self.path, "rb") as handle:
            handle.seek(begin)
            data = handle.read(end - begin)
        for number, line in enumerate(data.splitlines(), start=first):
            self._keep(number, line)


class EventLog(Sequence[SessionEvent]):
    """A session's whole log: the older part read from the file on demand, the rest
    (read at open, or appended since) in memory. Indexing, slicing, iterating and
    ``reversed`` see every event, as a list would; iterating the older part reads it
    a stretch at a time, so it never holds the whole log."""

    STRETCH = 2048

    def __init__(self, older: OlderRecords, tail: Sequence[SessionEvent] = ()) -> None:
        self.older = older
        self.base = len(older)
        self.recent: list[SessionEvent] = list(tail)
        self.keep: set[int] = set()
        """Older seqs whose events stay in memory once read (the session's history:
        each request measures and sends it again), beyond the bounded cache."""
        self._kept: dict[int, SessionEvent] = {}

    def append(self, event: SessionEvent) -> None:
        self.recent.append(event)

    def __len__(self) -> int:
        return self.base + len(self.recent)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | list[SessionEvent]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._range(start, stop)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("event index out of range")
        if index >= self.base:
            return self.recent[index - self.base]
        kept = self._kept.get(index)
        if kept is not None:
            return kept
        return self._keeping(index, self.older.get(index))

    def _keeping(self, seq: int, event: SessionEvent) -> SessionEvent:
        if seq in self.keep:
            self._kept[seq] = event
        return event

    def _range(self, start: int, stop: int) -> list[SessionEvent]:
        if start >= stop:
            return []
        out = self.older.range(start, min(stop, self.base)) if start < self.base else []
        if stop > self.base:
            out.extend(self.recent[max(start, self.base) - self.base : stop - self.base])
        return out

    def __iter__(self) -> Iterator[SessionEvent]:
        for start in range(0, self.base, self.STRETCH):
            yield from self.older.range(start, min(start + self.STRETCH, self.base))
        yield from list(self.recent)

    def __reversed__(self) -> Iterator[SessionEvent]:
        yield from reversed(list(self.recent))
        for stop in range(self.base, 0, -self.STRETCH):
            yield from reversed(self.older.range(max(0, stop - self.STRETCH), stop))

    def events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The events at ``seqs``, the older ones read together."""
        kept = self._kept
        older = [seq for seq in seqs if seq < self.base and seq not in kept]
        found = dict(zip(older, self.older.many(older), strict=True)) if older else {}
        for seq, event in found.items():
            self._keeping(seq, event)
        return [
            self.recent[seq - self.base] if seq >= self.base else kept.get(seq) or found[seq]
            for seq in seqs
        ]
