"""The SQLite backend: every session in one WAL-mode database, ``$DSH_HOME/sessions.sqlite``.

Rows hold the same stored records as the JSONL backend (delta runs packed), one
record a row, so both backends share one encoding and one reader. Each append is one
transaction, synced before it returns (``synchronous=FULL``).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite
from pydantic import ValidationError

from dsh.bulk import collector_paused
from dsh.llm import SessionId
from dsh.paths import escape_segment
from dsh.session.databases import PrivateDatabase, identity
from dsh.session.events import SessionEvent
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
    read_header,
    salvage_header,
)
from dsh.session.records import decode, encode, escape_surrogates
from dsh.wire import dumps

FILE_NAME = "sessions.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    header TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    cwd TEXT
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time INTEGER NOT NULL,
    data TEXT NOT NULL,
    source_event_seqs TEXT,
    surface_op TEXT,
    ignorable INTEGER,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


def _row(session_id: str, record: dict[str, Any]) -> tuple[Any, ...]:
    packed = "seq0" in record
    surface = record.get("surfaceOp")
    sources = record.get("sourceEventSeqs")
    return (
        session_id,
        record["seq0"] if packed else record["seq"],
        record["type"],
        record["time0"] if packed else record["time"],
        dumps(record["data"]),
        dumps(sources) if sources is not None else None,
        dumps(surface) if surface is not None else None,
        1 if record.get("ignorable") else None,
    )


def text_column(text: str | None) -> str | None:
    """Text for a plain column or parameter, which SQLite takes as UTF-8: a lone
    surrogate (from a folder name that is not UTF-8, say) as its escape. JSON columns
    use ``dumps``, which escapes the same way and reads back unchanged."""
    return None if text is None else escape_surrogates(text)


# Text columns are read as their bytes and decoded here, a row at a time: a byte that
# is not UTF-8 (a damaged disk) then costs its row, where SQLite's own decoding would
# fail the whole query, and with it every other row.
_EVENT_ROWS = (
    "SELECT seq, CAST(type AS BLOB), time, CAST(data AS BLOB), CAST(source_event_seqs AS BLOB),"
    " CAST(surface_op AS BLOB), ignorable FROM events WHERE session_id = ? ORDER BY seq"
)
_HEADER_ROWS = (
    "SELECT CAST(id AS BLOB), CAST(header AS BLOB), created_at, CAST(cwd AS BLOB) FROM sessions"
)


def _record(row: Sequence[Any]) -> dict[str, Any]:
    seq, raw_type, time, data, sources, surface, ignorable = row
    type_ = bytes(raw_type).decode()
    if type_ in ("text-chunks", "reasoning-chunks", "tool-call-chunks"):
        return {"type": type_, "seq0": seq, "time0": time, "data": json.loads(data)}
    record: dict[str, Any] = {"type": type_, "seq": seq, "time": time, "data": json.loads(data)}
    if sources is not None:
        record["sourceEventSeqs"] = json.loads(sources)
    if surface is not None:
        record["surfaceOp"] = json.loads(surface)
    if ignorable:
        record["ignorable"] = True
    return record


def _row_size(row: Sequence[Any]) -> int:
    """About the bytes a row stores (its text columns, and a few for its numbers)."""
    return 16 + sum(len(value) for value in row if isinstance(value, bytes))


def _text(value: Any) -> str | None:
    """A text column read as bytes, or None where it is empty or not UTF-8."""
    if not isinstance(value, bytes):
        return None
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


_ESCAPED_SURROGATE = re.compile(r"\\u(d[89a-f][0-9a-f]{2})")


def _unescaped(text: str | None) -> str | None:
    """A plain column's text as it was before :func:`text_column` escaped its lone
    surrogates."""
    if text is None:
        return None
    return _ESCAPED_SURROGATE.sub(lambda m: chr(int(m[1], 16)), text)


class SqlitePersistence:
    name = "sqlite"

    def __init__(self, home: Path) -> None:
        self.path = home / FILE_NAME
        self._database = PrivateDatabase(
            self.path, SCHEMA, label="SQLite session store", pragmas=("synchronous=FULL",)
        )
        self._pending: dict[SessionId, SessionHeader] = {}
        self._next_seq: dict[SessionId, int] = {}
        self._size = 0  # the database file's largest size seen: it never shrinks

    async def _connect(self) -> aiosqlite.Connection:
        return await self._database.connect()

    def location(self, session_id: SessionId) -> str | None:
        return f"{self.path}#{session_id}"

    def log_path(self, header: SessionHeader) -> Path:
        return self.path

    def blob_dir(self, header: SessionHeader) -> Path:
        return self.path.parent / "blobs" / escape_segment(header.id)

    async def _header(self, session_id: SessionId) -> tuple[SessionHeader, LoadIssue | None] | None:
        db = await self._connect()
        query = f"{_HEADER_ROWS} WHERE id = ?"
        async with db.execute(query, (text_column(session_id),)) as rows:
            row = await rows.fetchone()
        if row is None:
            return None
        return self._read_header(session_id, row[1], row[2], row[3])

    def _read_header(
        self, session_id: str, text: Any, created_at: Any, cwd: Any
    ) -> tuple[SessionHeader, LoadIssue | None]:
        """A row's header, or, when it is damaged, what the row's own columns and the
        legible part of it say (and the issue that says so)."""
        where = str(self.location(SessionId(session_id)))
        try:
            if not isinstance(text, bytes):
                raise CorruptSessionError(f"{where}: the header is not text")
            try:
                raw = json.loads(text)
            except ValueError as error:
                raise CorruptSessionError(f"{where}: unreadable header: {error}") from None
            return read_header(raw, where), None
        except CorruptSessionError as damage:
            return salvage_header(
                text if isinstance(text, bytes) else b"",
                where,
                problem=str(damage).removeprefix(f"{where}: "),
                session_id=session_id,
                created_at=created_at if isinstance(created_at, int) else 0,
                cwd=_unescaped(_text(cwd)),
            )

    async def _still_there(self) -> None:
        """Refuse to write into a database file that was deleted, replaced or cut short
        since it was opened: SQLite would go on writing to the open file, and every
        write would be lost with it."""
        opened = self._database.opened
        if opened is None:
            return
        what = f"the session database {self.path}"
        try:
            device, inode, size = await asyncio.to_thread(identity, self.path)
        except FileNotFoundError:
            raise LogLostError.deleted(what) from None
        if (device, inode) != opened[:2]:
            raise LogLostError.replaced(what)
        self._size = max(self._size, opened[2])
        if size < self._size:
            raise LogLostError.truncated(what, f"{size} bytes left of {self._size}")
        self._size = size

    async def create(self, header: SessionHeader) -> None:
        if header.id in self._pending or await self.exists(header.id):
            raise PersistenceError(f"session {header.id} already exists")
        self._pending[header.id] = header
        self._next_seq[header.id] = 0

    async def sync(self, session_id: SessionId) -> None:
        """Nothing to do: every transaction is synced as it commits (``synchronous=FULL``)."""

    async def append(
        self, session_id: SessionId, events: Sequence[SessionEvent], *, sync: bool = True
    ) -> None:
        if not events:
            return
        expected = self._next_seq.get(session_id)
        if expected is None:
            raise PersistenceError(f"session {session_id} was neither created nor loaded here")
        if events[0].seq != expected:
            raise SeqMismatchError(
                f"session {session_id}: append starts at seq {events[0].seq}, "
                f"the stored log continues at {expected}"
            )
        db = await self._connect()
        if self._database.read_only is not None:
            raise PersistenceError(
                f"the session database {self.path} cannot be written ({self._database.read_only})"
            )
        await self._still_there()
        rows = [_row(session_id, record) for record in encode(events)]
        header = self._pending.get(session_id)
        try:
            if header is not None:
                await db.execute(
                    "INSERT INTO sessions (id, header, created_at, cwd) VALUES (?, ?, ?, ?)",
                    (
                        header.id,
                        dumps(header.to_dict()),
                        header.created_at,
                        text_column(header.cwd),
                    ),
                )
            await db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            await db.commit()
        except BaseException:
            await db.rollback()
            raise
        self._pending.pop(session_id, None)
        self._next_seq[session_id] = events[-1].seq + 1

    async def load(self, session_id: SessionId) -> LoadedSession:
        loaded = await self.inspect(session_id)
        self._next_seq[session_id] = len(loaded.events) - len(loaded.repaired)
        if loaded.repaired:
            await self.append(session_id, loaded.repaired)
        return loaded

    async def inspect(self, session_id: SessionId) -> LoadedSession:
        found = await self._header(session_id)
        if found is None:
            raise SessionNotFoundError(session_id)
        header, damage = found
        db = await self._connect()
        reader = Reader(str(self.location(session_id)))
        if damage is not None:
            reader.note(damage)
        # Many events become objects at once: see dsh.bulk.
        with collector_paused():
            async with db.execute(_EVENT_ROWS, (session_id,)) as cursor:
                place = 0
                async for row in cursor:
                    place += 1
                    try:
                        events = decode(_record(tuple(row)))
                    except (ValueError, ValidationError) as error:
                        reader.unreadable(place, _row_size(row), str(error).splitlines()[0])
                        continue
                    reader.read(place, _row_size(row), events)
        return reader.finish(header)

    async def exists(self, session_id: SessionId) -> bool:
        if session_id in self._pending:
            return True
        db = await self._connect()
        query = "SELECT 1 FROM sessions WHERE id = ?"
        async with db.execute(query, (text_column(session_id),)) as rows:
            return await rows.fetchone() is not None

    async def list(self, cwd: str | None = None) -> builtins.list[SessionHeader]:
        db = await self._connect()
        headers = []
        where, params = ("WHERE cwd = ?", (text_column(cwd),)) if cwd is not None else ("", ())
        query = f"{_HEADER_ROWS} {where} ORDER BY created_at"
        async with db.execute(query, params) as rows:
            async for raw_id, text, created_at, raw_cwd in rows:
                session_id = _text(raw_id)
                if session_id is None:
                    continue  # no id to find its events by
                try:
                    headers.append(self._read_header(session_id, text, created_at, raw_cwd)[0])
                except PersistenceError:
                    continue  # a format this dsh cannot read
        return headers

    async def delete(self, session_id: SessionId) -> bool:
        db = await self._connect()
        self._pending.pop(session_id, None)
        self._next_seq.pop(session_id, None)
        cursor = await db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        await db.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
        await db.commit()
        blobs = self.path.parent / "blobs" / escape_segment(session_id)
        await asyncio.to_thread(shutil.rmtree, blobs, ignore_errors=True)
        return cursor.rowcount > 0

    def forget(self, session_id: SessionId) -> None:
        self._next_seq.pop(session_id, None)

    async def close(self) -> None:
        await self._database.close()
