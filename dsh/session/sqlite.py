"""The SQLite backend: every session in one WAL-mode database, ``$DSH_HOME/sessions.sqlite``.

Rows hold the same stored records as the JSONL backend (delta runs packed), one
record a row, so both backends share one encoding and one reader. Each append is one
transaction, synced before it returns (``synchronous=FULL``).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite
from pydantic import ValidationError

from dsh.bulk import collector_paused
from dsh.llm import SessionId
from dsh.paths import PRIVATE_FILE, escape_segment, private_dir
from dsh.session.events import SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.persistence import (
    CorruptSessionError,
    LoadedSession,
    PersistenceError,
    Reader,
    SeqMismatchError,
    SessionNotFoundError,
    read_header,
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


async def open_database(path: Path) -> aiosqlite.Connection:
    """An aiosqlite connection whose worker thread never keeps the process alive.

    aiosqlite runs each connection on a non-daemon thread, so one connection left open
    by mistake would hang the interpreter at exit. Every write here is awaited to its
    commit, so a daemon thread loses nothing when the process ends.
    """
    connection = aiosqlite.connect(path)
    thread = getattr(connection, "_thread", None)
    if thread is not None and not thread.is_alive():
        thread.daemon = True
    return await connection


class PrivateDatabase:
    """One SQLite file opened on first use: private to the user (0600 in a 0700
    folder), in WAL mode, with its schema applied. Once closed it stays closed:
    reopening would start a worker thread that nobody closes."""

    def __init__(
        self, path: Path, schema: str, *, label: str, pragmas: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        self._schema = schema
        self._label = label
        self._pragmas = ("journal_mode=WAL", *pragmas)
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def connect(self) -> aiosqlite.Connection:
        async with self._opening:
            if self._closed:
                raise RuntimeError(f"the {self._label} is closed")
            if self._db is None:
                private_dir(self.path.parent)
                if not self.path.exists():
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE))
                db = await open_database(self.path)
                for pragma in self._pragmas:
                    await db.execute(f"PRAGMA {pragma}")
                await db.executescript(self._schema)
                await db.commit()
                self._db = db
            return self._db

    async def close(self) -> None:
        self._closed = True
        async with self._opening:
            if self._db is not None:
                await self._db.close()
                self._db = None


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


def _record(row: Sequence[Any]) -> dict[str, Any]:
    seq, type_, time, data, sources, surface, ignorable = row
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


class SqlitePersistence:
    name = "sqlite"

    def __init__(self, home: Path) -> None:
        self.path = home / FILE_NAME
        self._database = PrivateDatabase(
            self.path, SCHEMA, label="SQLite session store", pragmas=("synchronous=FULL",)
        )
        self._pending: dict[SessionId, SessionHeader] = {}
        self._next_seq: dict[SessionId, int] = {}

    async def _connect(self) -> aiosqlite.Connection:
        return await self._database.connect()

    def location(self, session_id: SessionId) -> str | None:
        return f"{self.path}#{session_id}"

    def log_path(self, header: SessionHeader) -> Path:
        return self.path

    def blob_dir(self, header: SessionHeader) -> Path:
        return self.path.parent / "blobs" / escape_segment(header.id)

    async def _header(self, session_id: SessionId) -> SessionHeader | None:
        db = await self._connect()
        query = "SELECT header FROM sessions WHERE id = ?"
        async with db.execute(query, (text_column(session_id),)) as rows:
            row = await rows.fetchone()
        if row is None:
            return None
        return self._parse_header(row[0], session_id)

    def _parse_header(self, text: str, session_id: str) -> SessionHeader:
        where = str(self.location(SessionId(session_id)))
        try:
            raw = json.loads(text)
        except ValueError as error:
            raise CorruptSessionError(f"{where}: unreadable header: {error}") from None
        return read_header(raw, where)

    async def create(self, header: SessionHeader) -> None:
        if header.id in self._pending or await self._header(header.id) is not None:
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
        header = await self._header(session_id)
        if header is None:
            raise SessionNotFoundError(session_id)
        db = await self._connect()
        reader = Reader(str(self.location(session_id)))
        query = (
            "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable "
            "FROM events WHERE session_id = ? ORDER BY seq"
        )
        # Many events become objects at once: see dsh.bulk.
        with collector_paused():
            async with db.execute(query, (session_id,)) as cursor:
                async for row in cursor:
                    try:
                        records = decode(_record(tuple(row)))
                    except (ValueError, ValidationError) as error:
                        reader.unreadable(row[0], str(error).splitlines()[0])
                        continue
                    for event in records:
                        reader.add(event, row[0])
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
        query = f"SELECT id, header FROM sessions {where} ORDER BY created_at"
        async with db.execute(query, params) as rows:
            async for session_id, text in rows:
                try:
                    headers.append(self._parse_header(text, session_id))
                except PersistenceError:
                    continue
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

    async def close(self) -> None:
        await self._database.close()
