"""The JSONL backend (the default): one append-only file per session.

``$DSH_HOME/sessions/--<project-key>--/<id>/session.jsonl`` holds the header on its
first line, then one stored record per line. A file is born whole: header and first
events are written to a temporary file, synced, then linked into place, so a reader
never sees a half-made file. Appends are synced before ``append`` returns. Files are
0600 inside 0700 directories. All file work runs off the event loop.
"""

from __future__ import annotations

import array
import asyncio
import builtins
import contextlib
import glob
import io
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dsh.bulk import collector_paused
from dsh.llm import SessionId
from dsh.paths import PRIVATE_FILE, escape_segment, private_dir, project_key, unescape_segment
from dsh.session.events import EventFormatError, SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.persistence import (
    CorruptSessionError,
    LoadedSession,
    LoadIssue,
    LogLostError,
    PersistenceError,
    Reader,
    SeqMismatchError,
    SessionNotFoundError,
    legible_fields,
    read_header,
    salvage_header,
)
from dsh.session.records import decode, encode_lines
from dsh.session.snapshot import (
    EventLog,
    LineIndex,
    OlderRecords,
    Snapshot,
    SnapshotMismatch,
    digest,
    open_with_snapshot,
    remove_snapshot,
    vocabulary,
    write_snapshot,
)
from dsh.wire import dumps

_log = logging.getLogger("dsh.session")

FILE_NAME = "session.jsonl"


def header_record(header: SessionHeader) -> dict[str, Any]:
    return {"type": "session", **header.to_dict()}


def parse_header(line: bytes, location: str) -> SessionHeader:
    try:
        raw = json.loads(line)
    except ValueError as error:
        raise CorruptSessionError(f"{location}:1: unreadable header: {error}") from None
    if not isinstance(raw, dict) or raw.get("type") != "session":
        raise CorruptSessionError(f"{location}:1: the first line is not a session header")
    return read_header({k: v for k, v in raw.items() if k != "type"}, f"{location}:1")


def parse_jsonl(
    data: bytes, location: str, *, folder: Path | None = None, made_at: int = 0
) -> tuple[LoadedSession, int]:
    """Read a stored (or exported) session: the repaired view, and how many leading
    bytes are sound (a torn last line lies beyond them).

    A damaged header costs only what cannot be known without it: its legible fields
    are kept, the id comes from ``folder`` (the session's folder, named by its id)
    when the log is filed in one, the creation time from the first event (else
    ``made_at``), and the issue says so."""
    if not data:
        raise CorruptSessionError(f"{location}: the session log is empty")
    lines = data.split(b"\n")
    if len(lines) < 2:
        raise CorruptSessionError(f"{location}: no complete header line")
    reader = Reader(location)
    offset = len(lines[0]) + 1
    good_size = offset
    body = lines[1:]
    # The piece after the final newline is unterminated: empty in a clean file.
    last_content = max((i for i, line in enumerate(body) if line), default=-1)
    for index, line in enumerate(body):
        number = index + 2  # line numbers as an editor shows them
        terminated = index < len(body) - 1
        if not line and not terminated:
            break
        last = index >= last_content
        try:
            if not terminated:
                raise EventFormatError("the line has no end (the write was cut short)")
            records = decode(json.loads(line))
        except (ValueError, ValidationError) as error:
            if last:
                reader.torn(number, str(error).splitlines()[0])
                break
            reader.unreadable(number, len(line) + 1, str(error).splitlines()[0])
        else:
            reader.read(number, len(line) + 1, records)
        offset += len(line) + 1
        good_size = offset
    header = _header_of(lines[0], location, reader, folder, made_at)
    return reader.finish(header), good_size


def _header_of(
    line: bytes, location: str, reader: Reader, folder: Path | None, made_at: int
) -> SessionHeader:
    try:
        return parse_header(line, location)
    except CorruptSessionError as damage:
        session_id = unescape_segment(folder.name) if folder is not None else None
        session_id = session_id or legible_fields(line).get("id")
        if not isinstance(session_id, str) or not session_id:
            raise  # an export: without its header nothing says which session it is
        made = reader.first_time() or made_at
        header, issue = _salvaged(line, location, str(damage), session_id, folder, made)
        reader.note(issue)
        return header


def _salvaged(
    line: bytes,
    location: str,
    damage: str,
    session_id: str,
    folder: Path | None,
    created_at: int,
) -> tuple[SessionHeader, LoadIssue]:
    def filed_here(cwd: str) -> bool:
        return folder is None or project_key(cwd) == folder.parent.name

    return salvage_header(
        line,
        f"{location}:1",
        problem=damage.removeprefix(f"{location}:1: ").removeprefix(f"{location}: "),
        session_id=session_id,
        created_at=created_at,
        cwd_fits=filed_here,
    )


def _listed_header(path: Path) -> SessionHeader | None:
    """The header of the log at ``path`` for a listing, reading no more than its first
    lines; a damaged one as :func:`parse_jsonl` reads it. None for a log that holds
    no header line at all (an empty file)."""
    with open(path, "rb") as handle:
        first = handle.readline()
        try:
            return parse_header(first, str(path))
        except CorruptSessionError as damage:
            if not first.endswith(b"\n"):
                return None
            made = _time_of(handle.readline()) or _made_at(path)
            folder = path.parent
            session_id = unescape_segment(folder.name)
            return _salvaged(first[:-1], str(path), str(damage), session_id, folder, made)[0]


def _time_of(line: bytes) -> int | None:
    """The time of the stored record ``line``, if it can be read."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    stamp = record.get("time", record.get("time0"))
    return stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else None


def _made_at(path: Path) -> int:
    """When a file was last written, in epoch ms (what is left to date a session by
    when neither its header nor its first event can be read)."""
    return int(path.stat().st_mtime * 1000)


def _cut(path: Path, size: int) -> None:
    """Drop everything past ``size`` bytes (a torn last record), durably: only ever
    done by the session's one writer as it opens the session (it holds the lock)."""
    with open(path, "r+b") as handle:
        handle.truncate(size)
        os.fsync(handle.fileno())


def export_jsonl(header: SessionHeader, events: Sequence[SessionEvent]) -> str:
    """A session in the stored JSONL format, as ``dsh sessions export`` writes it."""
    return dumps(header_record(header)) + "\n" + encode_lines(events)


@dataclass(frozen=True)
class Resumed:
    """A stored session opened through its snapshot."""

    header: SessionHeader
    state: dict[str, Any]
    """What the snapshot derived from the log's first ``log.base`` events."""
    log: EventLog


@dataclass(frozen=True)
class OpenedLog:
    snapshot: Snapshot
    index: LineIndex
    size: int
    identity: tuple[int, int]
    log: EventLog


class _File:
    """What this process knows about one session's file."""

    def __init__(self, path: Path, header: SessionHeader, next_seq: int, size: int) -> None:
        self.path = path
        self.header = header
        self.next_seq = next_seq
        self.size = size  # bytes known good; anything beyond is a torn tail to cut
        self.identity: tuple[int, int] | None = None  # the file's device and inode
        self.lock = asyncio.Lock()
        self.header_line = b""
        self.index: LineIndex | None = None
        """Where each record starts, while the log is one dsh wrote cleanly (None: it
        held damage when read, so no snapshot describes it)."""


class JsonlPersistence:
    name = "jsonl"

    def __init__(self, home: Path) -> None:
        self.root = home / "sessions"
        self._files: dict[SessionId, _File] = {}

    def path_for(self, header: SessionHeader) -> Path:
        return self.root / project_key(header.cwd) / escape_segment(header.id) / FILE_NAME

    def log_path(self, header: SessionHeader) -> Path:
        return self.path_for(header)

    def blob_dir(self, header: SessionHeader) -> Path:
        return self.path_for(header).parent / "blobs"

    def _find(self, session_id: SessionId) -> Path | None:
        known = self._files.get(session_id)
        if known is not None:
            return known.path
        matches = list(self.root.glob(f"*/{escape_segment(session_id)}/{FILE_NAME}"))
        return matches[0] if matches else None

    def location(self, session_id: SessionId) -> str | None:
        path = self._find(session_id)
        return str(path) if path is not None else None

    async def create(self, header: SessionHeader) -> None:
        if header.id in self._files or self._find(header.id) is not None:
            raise PersistenceError(f"session {header.id} already exists")
        self._files[header.id] = _File(self.path_for(header), header, 0, 0)

    async def append(
        self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
    ) -> None:
        if not events:
            return
        known = self._files.get(session_id)
        if known is None:
            raise PersistenceError(f"session {session_id} was neither created nor loaded here")
        async with known.lock:
            if events[0].seq != known.next_seq:
                raise SeqMismatchError(
                    f"session {session_id}: append starts at seq {events[0].seq}, "
                    f"the stored log continues at {known.next_seq}"
                )
            data = encode_lines(events).encode()
            before = known.size
            known.size = await asyncio.to_thread(self._write, known, data, sync)
            known.next_seq = events[-1].seq + 1
            if before == 0:
                known.header_line = (dumps(header_record(known.header)) + "\n").encode()
                before = len(known.header_line)
                known.index = LineIndex()
            if known.index is not None and not known.index.add(data, before):
                known.index = None

    async def sync(self, session_id: SessionId) -> None:
        known = self._files.get(session_id)
        if known is None or known.size == 0:
            return
        # No lock: an fsync through a descriptor of its own may overlap an append.
        await asyncio.to_thread(_fsync_log, known)

    def _write(self, known: _File, data: bytes, sync: bool) -> int:
        """Append ``data`` at the end of the log, which must be where this writer left
        it: a log that grew meanwhile was written by someone else (the session lock
        keeps them out; see :mod:`dsh.session.lock`), and is refused, never cut; one
        deleted, replaced or cut short meanwhile is refused too, rather than written
        into nothing or after a hole."""
        if known.size == 0:
            return self._write_new(known, data)
        # Unbuffered: a buffer that cannot be flushed (a full disk) would be written
        # again by the truncate and the close below, past the end they restore.
        with _open_log(known) as handle:
            end = handle.seek(0, os.SEEK_END)
            if end < known.size:
                raise LogLostError.truncated(
                    f"the session log {known.path}", f"{end} bytes left of the {known.size} written"
                )
            if end != known.size:
                raise PersistenceError(
                    f"{known.path}: the log is {end} bytes where this writer left "
                    f"{known.size}: another process wrote to it; nothing appended"
                )
            try:
                written = memoryview(data)
                while written:  # a write may be short (a disk filling up): go on or fail
                    written = written[handle.write(written) or 0 :]
            except OSError:
                # A short write (a full disk) leaves part of a record: take back what
                # this writer itself just added, so the log ends where it was.
                with contextlib.suppress(OSError):
                    os.ftruncate(handle.fileno(), known.size)
                raise
            if sync:
                os.fsync(handle.fileno())
        return known.size + len(data)

    def _write_new(self, known: _File, data: bytes) -> int:
        folder = private_dir(known.path.parent)
        private_dir(self.root)
        content = (dumps(header_record(known.header)) + "\n").encode() + data
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".new-", suffix=".jsonl")
        try:
            os.fchmod(fd, PRIVATE_FILE)
            written = memoryview(content)
            while written:  # a write may be short (a disk filling up): go on or fail
                written = written[os.write(fd, written) :]
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.link(temp, known.path)  # fails rather than overwrite an existing session
            status = os.stat(temp)
            known.identity = (status.st_dev, status.st_ino)
        finally:
            if fd != -1:
                os.close(fd)
            os.unlink(temp)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return len(content)

    async def load(self, session_id: SessionId) -> LoadedSession:
        return await self._read(session_id, repair=True)

    async def inspect(self, session_id: SessionId) -> LoadedSession:
        return await self._read(session_id, repair=False)

    async def _read(self, session_id: SessionId, *, repair: bool) -> LoadedSession:
        path = self._find(session_id)
        if path is None:
            raise SessionNotFoundError(session_id)
        known = self._files.get(session_id)
        if known is not None:
            async with known.lock:  # never read a file mid-append
                loaded, good_size, identity, index = await asyncio.to_thread(self._parse, path)
        else:
            loaded, good_size, identity, index = await asyncio.to_thread(self._parse, path)
        if not repair:
            return loaded
        if known is None:
            known = _File(path, loaded.header, 0, good_size)
            self._files[session_id] = known
        known.header, known.size, known.identity = loaded.header, good_size, identity
        known.next_seq = len(loaded.events) - len(loaded.repaired)
        known.index = index
        if index is not None:
            known.header_line = index.header_line
        if any(issue.kind == "torn-tail" for issue in loaded.issues):
            async with known.lock:
                await asyncio.to_thread(_cut, path, good_size)
        if loaded.repaired:
            await self.append(session_id, loaded.repaired)
        return loaded

    def _parse(self, path: Path) -> tuple[LoadedSession, int, tuple[int, int], LineIndex | None]:
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            data = handle.read()
        with collector_paused():
            loaded, good_size = parse_jsonl(
                data, str(path), folder=path.parent, made_at=int(status.st_mtime * 1000)
            )
        index: LineIndex | None = None
        if not loaded.issues:
            header_end = data.index(b"\n") + 1
            index = LineIndex(header_line=data[:header_end])
            if not index.add(data[header_end:good_size], header_end):
                index = None
        return loaded, good_size, (status.st_dev, status.st_ino), index

    def forget(self, session_id: SessionId) -> None:
        self._files.pop(session_id, None)

    async def open_fast(self, session_id: SessionId) -> Resumed | None:
        """Open a stored session to continue it through its snapshot: the header, the
        snapshot and the events after it, the older ones left in the file. None when
        there is no snapshot that fits the log (then :meth:`load` reads it whole)."""
        found = await self.peek(session_id, any_vocabulary=False)
        if found is None:
            return None
        header, opened = found
        path = opened.log.older.path
        known = _File(path, header, len(opened.log), opened.size)
        known.identity = opened.identity
        known.index = opened.index
        known.header_line = opened.index.header_line
        self._files[session_id] = known
        return Resumed(header, opened.snapshot.state, opened.log)

    async def peek(
        self, session_id: SessionId, *, any_vocabulary: bool = True
    ) -> tuple[SessionHeader, OpenedLog] | None:
        """A stored session read through its snapshot, only to look at (the read-only
        preview, which may come before the plugins' event types are registered: with
        ``any_vocabulary`` a snapshot written under others is taken): None when it
        has none that fits."""
        path = self._find(session_id)
        if path is None or session_id in self._files:
            return None
        try:
            return await asyncio.to_thread(self._open_fast, path, any_vocabulary)
        except (SnapshotMismatch, OSError) as why:
            _log.info("%s: read whole (%s)", path, why)
            return None

    def _open_fast(self, path: Path, any_vocabulary: bool) -> tuple[SessionHeader, OpenedLog]:
        with open(path, "rb") as handle:
            header_line = handle.readline()
        if not header_line.endswith(b"\n"):
            raise SnapshotMismatch("no complete header line")
        try:
            header = parse_header(header_line[:-1], str(path))
        except PersistenceError as error:
            raise SnapshotMismatch(str(error)) from None
        with collector_paused():
            opened = open_with_snapshot(path, header_line, any_vocabulary=any_vocabulary)
        opened.index.header_line = header_line
        older = OlderRecords(path, opened.index, opened.snapshot.next_seq, opened.snapshot.log_size)
        log = EventLog(older, opened.tail)
        return header, OpenedLog(opened.snapshot, opened.index, opened.size, opened.identity, log)

    def snapshot(self, session_id: SessionId, state: dict[str, Any]) -> Callable[[], None] | None:
        """What writes a snapshot of ``state`` (:meth:`Session.derived_state`, taken
        when every event of the session was stored) beside the log, to run off the
        loop; None when this log cannot have one (damage read in it, or events stored
        since ``state``)."""
        known = self._files.get(session_id)
        index = known.index if known is not None else None
        if known is None or index is None or not index.seqs or state["next"] != known.next_seq:
            return None
        snapshot = Snapshot(
            next_seq=known.next_seq,
            log_size=known.size,
            lines=len(index.seqs),
            header_hash=digest(known.header_line),
            last_hash=digest(index.last_line),
            vocabulary=vocabulary(),
            state=state,
        )
        # A copy: appends go on extending the live index meanwhile.
        taken = LineIndex(array.array("q", index.seqs), array.array("q", index.offsets))
        folder = known.path.parent
        return lambda: write_snapshot(folder, snapshot, taken)

    async def exists(self, session_id: SessionId) -> bool:
        return (
            session_id in self._files or await asyncio.to_thread(self._find, session_id) is not None
        )

    async def list(self, cwd: str | None = None) -> builtins.list[SessionHeader]:
        return await asyncio.to_thread(self._list, cwd)

    def _list(self, cwd: str | None) -> builtins.list[SessionHeader]:
        folder = "*" if cwd is None else glob.escape(project_key(cwd))
        headers = []
        for path in sorted(self.root.glob(f"{folder}/*/{FILE_NAME}")):
            try:
                header = _listed_header(path)
            except (OSError, PersistenceError):
                continue
            if header is None:
                continue
            if cwd is None or header.cwd == cwd:
                headers.append(header)
        return headers

    async def delete(self, session_id: SessionId) -> bool:
        path = self._find(session_id)
        self._files.pop(session_id, None)
        if path is None:
            return False

        def remove() -> None:
            path.unlink(missing_ok=True)
            remove_snapshot(path.parent)
            shutil.rmtree(path.parent / "blobs", ignore_errors=True)
            try:
                path.parent.rmdir()
                path.parent.parent.rmdir()
            except OSError:
                pass  # other files live there (or other sessions of that project)

        await asyncio.to_thread(remove)
        return True

    async def close(self) -> None:
        self._files.clear()


def _open_log(known: _File) -> io.FileIO:
    """The log ``known`` writes, opened to append, if it is still the file this writer
    made or read: else a :class:`LogLostError` that says what became of it."""
    try:
        handle = open(known.path, "r+b", buffering=0)  # noqa: SIM115 (returned: the caller closes it)
    except FileNotFoundError:
        raise LogLostError.deleted(f"the session log {known.path}") from None
    status = os.fstat(handle.fileno())
    if known.identity is not None and (status.st_dev, status.st_ino) != known.identity:
        handle.close()
        raise LogLostError.replaced(f"the session log {known.path}")
    return handle


def _fsync_log(known: _File) -> None:
    try:
        fd = os.open(known.path, os.O_RDONLY)
    except FileNotFoundError:
        raise LogLostError.deleted(f"the session log {known.path}") from None
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
