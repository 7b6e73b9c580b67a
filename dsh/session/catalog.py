"""The session catalog: an index of every session for listing and full-text search.

It lives in ``$DSH_HOME/index.sqlite`` and is never the only copy of anything: it is
fed from events after they are stored, and ``rebuild`` recreates it from storage.
It keeps per session the directory, times, title, first prompt, token totals and
cost, and an FTS5 table over what the person and the model wrote (reasoning and
streaming chunks are not indexed). Its text holds each lone surrogate (a folder name
that is not UTF-8, half an emoji) as its escape, ``\\udce9``, and queries are escaped
the same way, so such a session is indexed and found like any other.

Being derived, it repairs itself, saying so in one line: a damaged file (not a
database, damaged pages, tables that are not an index's) is removed and starts
empty, and the store indexes the sessions it misses again
(:meth:`~dsh.session.store.SessionStore.index_missing`); a file that cannot be
written (a full or read-only disk) is copied into memory, where this process goes
on using it, so commands that only read work all the same.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from dsh.llm import TokenUsage, UserMessage, UserSource
from dsh.session.databases import (
    cannot_write,
    is_damaged,
    open_database,
    open_private,
    read_only_uris,
    reason,
)
from dsh.session.events import SessionEvent, title_of
from dsh.session.header import SessionHeader
from dsh.session.payloads import TurnStart
from dsh.session.persistence import LoadedSession, PersistenceError, SessionPersistence
from dsh.session.spend import Pricing, Spend
from dsh.session.sqlite import text_column

_log = logging.getLogger("dsh.session")

T = TypeVar("T")

FILE_NAME = "index.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    title TEXT,
    first_prompt TEXT,
    parent_session TEXT,
    last_seq INTEGER NOT NULL DEFAULT -1,
    turns INTEGER NOT NULL DEFAULT 0,
    backend TEXT NOT NULL,
    location TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL
);
CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions (cwd, updated_at DESC);
CREATE INDEX IF NOT EXISTS sessions_by_time ON sessions (updated_at DESC);
CREATE VIRTUAL TABLE IF NOT EXISTS event_text USING fts5(
    text, session_id UNINDEXED, seq UNINDEXED, type UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 2'
);
"""

COLUMNS = (
    "id, cwd, created_at, updated_at, title, first_prompt, parent_session, last_seq, turns, "
    "backend, location, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, cost"
)
TABLES = {
    "sessions": tuple(COLUMNS.split(", ")),
    "event_text": ("text", "session_id", "seq", "type"),
}

# Each catalog call tries again on a fresh index this many times before it fails.
ATTEMPTS = 3


class NotAnIndexError(sqlite3.DatabaseError):
    """The file is a database, but its tables are not the index's."""

    sqlite_errorcode = sqlite3.SQLITE_CORRUPT


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    cwd: str | None
    created_at: int
    updated_at: int
    title: str | None
    first_prompt: str | None
    parent_session: str | None
    last_seq: int
    turns: int
    backend: str
    location: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    reasoning_tokens: int
    cost: float | None

    @property
    def display_title(self) -> str:
        """The title, else the first line of the first prompt."""
        if self.title:
            return self.title
        first = (self.first_prompt or "").strip()
        return first.splitlines()[0][:80] if first else "(untitled)"


@dataclass(frozen=True)
class SearchHit:
    session_id: str
    seq: int
    type: str
    snippet: str


def indexed_text(event: SessionEvent) -> str | None:
    """The searchable text of an event: what the person or the model wrote."""
    match event.type:
        case "user/message" | "steering/message":
            return event.data.text() or None
        case "assistant/message":
            return event.data.message.text() or None
        case _:
            return None


def stored_events(loaded: LoadedSession) -> Sequence[SessionEvent]:
    """The events storage holds of a session read for the index: without the closing
    events crash repair adds in memory (its writer may still be writing that turn)."""
    return loaded.events[: len(loaded.events) - len(loaded.repaired)]


def fts_query(text: str) -> str:
    """Every word of ``text`` as a quoted FTS5 term (so no word is read as syntax); the
    last one also matches as a prefix, as people search while typing."""
    words = [w.replace('"', '""') for w in text.split()]
    if not words:
        return '""'
    terms = [f'"{w}"' for w in words]
    terms[-1] += "*"
    return " ".join(terms)


class Catalog:
    def __init__(self, home: Path, *, pricing: Pricing | None = None) -> None:
        self.path = home / FILE_NAME
        self._pricing = pricing
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self.in_memory: str | None = None
        """Why the index is kept in memory (its file cannot be written), when it is."""
        # One record at a time: each reads last_seq, then writes past it.
        self._recording = asyncio.Lock()

    async def _connect(self) -> aiosqlite.Connection:
        async with self._opening:
            if self._closed:
                raise RuntimeError("the catalog is closed")
            if self._db is None:
                self._db = await self._open()
            return self._db

    async def close(self) -> None:
        self._closed = True
        async with self._opening:
            if self._db is not None:
                await self._db.close()
                self._db = None

    async def _use(self, work: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """``work`` done on the index, repairing the index first when it turns out
        damaged or unwritable, and doing the work again."""
        for attempt in range(ATTEMPTS):
            db = await self._connect()
            try:
                return await work(db)
            except (sqlite3.Error, OSError) as error:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await db.rollback()
                # Damage: a new index; unwritable: one in memory (which is then final).
                repairable = is_damaged(error) or (cannot_write(error) and not self.in_memory)
                if not repairable or attempt == ATTEMPTS - 1:
                    raise
                await self._replace(db, error)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _replace(self, db: aiosqlite.Connection, error: BaseException) -> None:
        """Put a sound index in place of ``db``, which failed with ``error``: a new file
        for a damaged one, a copy in memory for one that cannot be written."""
        async with self._opening:
            if self._db is not db:
                return  # another call already replaced it
            self._db = None
            with contextlib.suppress(sqlite3.Error, ValueError):
                await db.close()
            if is_damaged(error):
                self._db = await self._fresh(error)
            else:
                self._db = await self._in_memory(error, copy=True)

    async def _open(self) -> aiosqlite.Connection:
        try:
            return await self._open_file()
        except (sqlite3.Error, OSError) as error:
            if is_damaged(error):
                return await self._fresh(error)
            if cannot_write(error):
                return await self._in_memory(error, copy=True)
            raise

    async def _open_file(self) -> aiosqlite.Connection:
        # The catalog is an index, rebuilt from the logs on demand: it needs to survive
        # the process dying (WAL gives that), not a power cut, so commits skip the fsync.
        return await open_private(self.path, SCHEMA, ("synchronous=NORMAL",), check=_check_tables)

    async def _fresh(self, damage: BaseException) -> aiosqlite.Connection:
        """A new, empty index in place of the damaged file (in memory if no new file
        can be made)."""
        _log.warning(
            "the session index %s is damaged (%s); dsh rebuilds it from the session logs",
            self.path,
            reason(damage),
        )
        try:
            await asyncio.to_thread(self._remove_files)
            return await self._open_file()
        except (sqlite3.Error, OSError) as error:
            if not (cannot_write(error) or is_damaged(error)):
                raise
            return await self._in_memory(error, copy=False)

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)

    async def _in_memory(self, failure: BaseException, *, copy: bool) -> aiosqlite.Connection:
        """The index in memory for the rest of this process: a copy of the file when
        it can be read (``copy``), else empty, to be filled from the logs."""
        self.in_memory = reason(failure)
        _log.warning(
            "the session index %s cannot be written (%s); this dsh keeps it in memory, "
            "from the session logs",
            self.path,
            self.in_memory,
        )
        db = await open_database(":memory:", uri=True)
        await db.executescript(SCHEMA)
        await db.commit()
        if copy and await asyncio.to_thread(self.path.exists):
            await _copy_index(db, self.path)
        return db

    # ------------------------------------------------------------------ writing

    async def record(
        self,
        header: SessionHeader,
        events: Sequence[SessionEvent],
        *,
        backend: str,
        location: str | None,
    ) -> bool:
        """Fold newly stored ``events`` into the index. Events already indexed (by seq)
        are skipped, so recording a batch twice is harmless. False, recording nothing,
        when the index lacks events before them (it was rebuilt, or a batch failed to
        be indexed): the caller records the session's whole log instead."""
        async with self._recording:
            return await self._use(
                lambda db: self._record_into(db, header, events, backend=backend, location=location)
            )

    async def _record_into(
        self,
        db: aiosqlite.Connection,
        header: SessionHeader,
        events: Sequence[SessionEvent],
        *,
        backend: str,
        location: str | None,
    ) -> bool:
        async with db.execute("SELECT last_seq FROM sessions WHERE id = ?", (header.id,)) as rows:
            row = await rows.fetchone()
        last_seq = row[0] if row is not None else -1
        fresh = [event for event in events if event.seq > last_seq]
        if fresh and fresh[0].seq > last_seq + 1:
            return False
        if not fresh and row is not None:
            return True
        await db.execute(
            "INSERT INTO sessions (id, cwd, created_at, updated_at, parent_session, backend,"
            " location) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (
                header.id,
                text_column(header.cwd),
                header.created_at,
                header.created_at,
                header.parent_session,
                backend,
                text_column(location),
            ),
        )
        if not fresh:
            await db.commit()
            return True

        updated = max((e.time for e in fresh if e.type != "session/end-seed"), default=None)
        title: str | None = None
        first_prompt: str | None = None
        turns = 0
        spent = Spend()
        texts: builtins.list[tuple[str, str, int, str]] = []
        for event in fresh:
            if isinstance(event.data, TurnStart):
                turns += 1
            elif (text := title_of(event)) is not None:
                title = text_column(text)
            spent.count(event, self._pricing)
            if (
                first_prompt is None
                and event.type == "user/message"
                and isinstance(event.data, UserMessage)
                and isinstance(event.data.source, UserSource)
            ):
                first_prompt = text_column(event.data.text()[:500]) or None
            searchable = indexed_text(event)
            if searchable:
                texts.append((text_column(searchable) or "", header.id, event.seq, event.type))

        await db.execute(
            """UPDATE sessions SET
                 updated_at = MAX(updated_at, COALESCE(?, updated_at)),
                 last_seq = ?,
                 title = COALESCE(?, title),
                 first_prompt = COALESCE(first_prompt, ?),
                 turns = turns + ?,
                 input_tokens = input_tokens + ?,
                 output_tokens = output_tokens + ?,
                 cache_read_tokens = cache_read_tokens + ?,
                 reasoning_tokens = reasoning_tokens + ?,
                 cost = CASE WHEN ? IS NULL THEN cost ELSE COALESCE(cost, 0) + ? END,
                 location = COALESCE(?, location)
               WHERE id = ?""",
            (
                updated,
                max(e.seq for e in fresh),
                title,
                first_prompt,
                turns,
                *_token_columns(spent.usage),
                spent.cost,
                spent.cost,
                text_column(location),
                header.id,
            ),
        )
        if texts:
            await db.executemany(
                "INSERT INTO event_text (text, session_id, seq, type) VALUES (?, ?, ?, ?)", texts
            )
        await db.commit()
        return True

    async def forget(self, session_id: str) -> None:
        async def delete(db: aiosqlite.Connection) -> None:
            await db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            await db.execute("DELETE FROM event_text WHERE session_id = ?", (session_id,))
            await db.commit()

        await self._use(delete)

    async def rebuild(self, persistences: Iterable[SessionPersistence]) -> int:
        """Drop the index and recreate it from storage. Returns how many sessions; one
        that cannot be read is left out, saying why."""

        async def empty(db: aiosqlite.Connection) -> None:
            await db.execute("DELETE FROM sessions")
            await db.execute("DELETE FROM event_text")
            await db.commit()

        await self._use(empty)
        count = 0
        for persistence in persistences:
            for header in await persistence.list():
                try:
                    loaded = await persistence.inspect(header.id)
                except PersistenceError as error:
                    _log.warning("session %s is not indexed: %s", header.id, error)
                    continue
                await self.record(
                    loaded.header,
                    stored_events(loaded),
                    backend=persistence.name,
                    location=persistence.location(header.id),
                )
                count += 1
        return count

    # ------------------------------------------------------------------ reading

    async def _rows(self, query: str, params: Sequence[object] = ()) -> builtins.list[Any]:
        async def fetch(db: aiosqlite.Connection) -> builtins.list[Any]:
            async with db.execute(query, params) as rows:
                return builtins.list(await rows.fetchall())

        return await self._use(fetch)

    async def get(self, session_id: str) -> CatalogEntry | None:
        rows = await self._rows(
            f"SELECT {COLUMNS} FROM sessions WHERE id = ?", (text_column(session_id),)
        )
        return CatalogEntry(*rows[0]) if rows else None

    async def list(
        self, *, cwd: str | None = None, limit: int | None = None
    ) -> builtins.list[CatalogEntry]:
        """Sessions, most recently updated first; only ``cwd``'s when given."""
        where = "WHERE cwd = ?" if cwd is not None else ""
        params: builtins.list[object] = [text_column(cwd)] if cwd is not None else []
        query = f"SELECT {COLUMNS} FROM sessions {where} ORDER BY updated_at DESC, id"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        return [CatalogEntry(*row) for row in await self._rows(query, params)]

    async def children(
        self, parent_id: str, *, limit: int | None = None
    ) -> builtins.list[CatalogEntry]:
        """The sessions whose header names ``parent_id`` as their parent (its forks and
        its subagents' sessions), newest first."""
        query = (
            f"SELECT {COLUMNS} FROM sessions WHERE parent_session = ? ORDER BY created_at DESC, id"
        )
        params: builtins.list[object] = [text_column(parent_id)]
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        return [CatalogEntry(*row) for row in await self._rows(query, params)]

    async def ids(self, *, cwd: str | None = None, backend: str | None = None) -> set[str]:
        """The ids of the indexed sessions (only ``cwd``'s, only ``backend``'s, when
        given)."""
        conditions, params = [], []
        for column, value in (("cwd", text_column(cwd)), ("backend", backend)):
            if value is not None:
                conditions.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        return {row[0] for row in await self._rows(f"SELECT id FROM sessions {where}", params)}

    async def ids_starting_with(self, prefix: str) -> builtins.list[str]:
        escaped = text_column(prefix) or ""
        escaped = escaped.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = await self._rows(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY id", (escaped + "%",)
        )
        return [row[0] for row in rows]

    async def search(
        self, text: str, *, session_id: str | None = None, cwd: str | None = None, limit: int = 20
    ) -> builtins.list[SearchHit]:
        """Events whose text holds every word of ``text``, best matches first."""
        query = (
            "SELECT t.session_id, t.seq, t.type, snippet(event_text, 0, '[', ']', '…', 12) "
            "FROM event_text t"
        )
        params: builtins.list[object] = []
        if cwd is not None:
            query += " JOIN sessions s ON s.id = t.session_id"
        query += " WHERE event_text MATCH ?"
        params.append(fts_query(text_column(text) or ""))
        if session_id is not None:
            query += " AND t.session_id = ?"
            params.append(text_column(session_id))
        if cwd is not None:
            query += " AND s.cwd = ?"
            params.append(text_column(cwd))
        query += " ORDER BY rank LIMIT ?"
        params.append(limit)
        rows = await self._rows(query, params)
        return [SearchHit(r[0], int(r[1]), r[2], r[3]) for r in rows]


async def _check_tables(
    db: aiosqlite.Connection, schema: str = "main", *, made: bool = False
) -> None:
    """Raise :class:`NotAnIndexError` when the file holds a table of the index's names
    with other columns (another program's file, a format of another version); with
    ``made``, also when it lacks one."""
    for table, columns in TABLES.items():
        async with db.execute(f"PRAGMA {schema}.table_info({table})") as rows:
            found = tuple(row[1] for row in await rows.fetchall())
        if (found or made) and found != columns:
            raise NotAnIndexError(f"its {table} table is not the index's")


async def _copy_index(db: aiosqlite.Connection, path: Path) -> None:
    """Copy what the index file at ``path`` holds into ``db`` (in memory), reading the
    file without writing it. A file that cannot be read leaves ``db`` empty."""
    for address in read_only_uris(path):
        try:
            await db.execute("ATTACH DATABASE ? AS disk", (address,))
        except sqlite3.Error:
            continue
        try:
            await _check_tables(db, "disk", made=True)
            await db.execute(
                f"INSERT INTO main.sessions ({COLUMNS}) SELECT {COLUMNS} FROM disk.sessions"
            )
            await db.execute(
                "INSERT INTO main.event_text (text, session_id, seq, type) "
                "SELECT text, session_id, seq, type FROM disk.event_text"
            )
            await db.commit()
            return
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                await db.rollback()
            await db.execute("DELETE FROM main.sessions")
            await db.execute("DELETE FROM main.event_text")
            await db.commit()
        finally:
            with contextlib.suppress(sqlite3.Error):
                await db.execute("DETACH DATABASE disk")


def _token_columns(usage: TokenUsage | None) -> tuple[int, int, int, int]:
    """Input, output, cache-read and reasoning tokens, as the index adds them up."""
    if usage is None:
        return (0, 0, 0, 0)
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens or 0,
        usage.reasoning_tokens or 0,
    )
