"""The session catalog: an index of every session for listing and full-text search.

It lives in ``$DSH_HOME/index.sqlite`` and is never the only copy of anything: it is
fed from events after they are stored, and ``rebuild`` recreates it from storage.
It keeps per session the directory, times, title, first prompt, token totals and
cost, and an FTS5 table over what the person and the model wrote (reasoning and
streaming chunks are not indexed). Its text holds each lone surrogate (a folder name
that is not UTF-8, half an emoji) as its escape, ``\\udce9``, and queries are escaped
the same way, so such a session is indexed and found like any other.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from dsh.llm import TokenUsage, UserMessage, UserSource
from dsh.session.databases import PrivateDatabase
from dsh.session.events import SessionEvent, TurnStart, title_of
from dsh.session.header import SessionHeader
from dsh.session.persistence import SessionPersistence
from dsh.session.spend import Pricing, Spend
from dsh.session.sqlite import text_column

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
        # The catalog is an index, rebuilt from the logs on demand: it needs to survive
        # the process dying (WAL gives that), not a power cut, so commits skip the fsync.
        self._database = PrivateDatabase(
            self.path, SCHEMA, label="catalog", pragmas=("synchronous=NORMAL",)
        )
        # One record at a time: each reads last_seq, then writes past it.
        self._recording = asyncio.Lock()

    async def _connect(self) -> aiosqlite.Connection:
        return await self._database.connect()

    async def close(self) -> None:
        await self._database.close()

    # ------------------------------------------------------------------ writing

    async def record(
        self,
        header: SessionHeader,
        events: Sequence[SessionEvent],
        *,
        backend: str,
        location: str | None,
    ) -> None:
        """Fold newly stored ``events`` into the index. Events already indexed (by seq)
        are skipped, so recording a batch twice is harmless."""
        async with self._recording:
            await self._record(header, events, backend=backend, location=location)

    async def _record(
        self,
        header: SessionHeader,
        events: Sequence[SessionEvent],
        *,
        backend: str,
        location: str | None,
    ) -> None:
        db = await self._connect()
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
        async with db.execute("SELECT last_seq FROM sessions WHERE id = ?", (header.id,)) as rows:
            row = await rows.fetchone()
        last_seq = row[0] if row is not None else -1
        fresh = [event for event in events if event.seq > last_seq]
        if not fresh:
            await db.commit()
            return

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

    async def forget(self, session_id: str) -> None:
        db = await self._connect()
        await db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        await db.execute("DELETE FROM event_text WHERE session_id = ?", (session_id,))
        await db.commit()

    async def rebuild(self, persistences: Iterable[SessionPersistence]) -> int:
        """Drop the index and recreate it from storage. Returns how many sessions."""
        db = await self._connect()
        await db.execute("DELETE FROM sessions")
        await db.execute("DELETE FROM event_text")
        await db.commit()
        count = 0
        for persistence in persistences:
            for header in await persistence.list():
                loaded = await persistence.inspect(header.id)
                await self.record(
                    loaded.header,
                    loaded.events,
                    backend=persistence.name,
                    location=persistence.location(header.id),
                )
                count += 1
        return count

    # ------------------------------------------------------------------ reading

    async def get(self, session_id: str) -> CatalogEntry | None:
        db = await self._connect()
        async with db.execute(
            f"SELECT {COLUMNS} FROM sessions WHERE id = ?", (text_column(session_id),)
        ) as rows:
            row = await rows.fetchone()
        return CatalogEntry(*row) if row is not None else None

    async def list(
        self, *, cwd: str | None = None, limit: int | None = None
    ) -> builtins.list[CatalogEntry]:
        """Sessions, most recently updated first; only ``cwd``'s when given."""
        db = await self._connect()
        where = "WHERE cwd = ?" if cwd is not None else ""
        params: builtins.list[object] = [text_column(cwd)] if cwd is not None else []
        query = f"SELECT {COLUMNS} FROM sessions {where} ORDER BY updated_at DESC, id"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        async with db.execute(query, params) as rows:
            return [CatalogEntry(*row) for row in await rows.fetchall()]

    async def children(
        self, parent_id: str, *, limit: int | None = None
    ) -> builtins.list[CatalogEntry]:
        """The sessions whose header names ``parent_id`` as their parent (its forks and
        its subagents' sessions), newest first."""
        db = await self._connect()
        query = (
            f"SELECT {COLUMNS} FROM sessions WHERE parent_session = ? ORDER BY created_at DESC, id"
        )
        params: builtins.list[object] = [text_column(parent_id)]
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        async with db.execute(query, params) as rows:
            return [CatalogEntry(*row) for row in await rows.fetchall()]

    async def ids(self, *, cwd: str | None = None) -> set[str]:
        """The ids of the indexed sessions (only ``cwd``'s when given)."""
        db = await self._connect()
        where = "WHERE cwd = ?" if cwd is not None else ""
        params = [text_column(cwd)] if cwd is not None else []
        async with db.execute(f"SELECT id FROM sessions {where}", params) as rows:
            return {row[0] for row in await rows.fetchall()}

    async def ids_starting_with(self, prefix: str) -> builtins.list[str]:
        db = await self._connect()
        escaped = text_column(prefix) or ""
        escaped = escaped.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        async with db.execute(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY id", (escaped + "%",)
        ) as rows:
            return [row[0] for row in await rows.fetchall()]

    async def search(
        self, text: str, *, session_id: str | None = None, cwd: str | None = None, limit: int = 20
    ) -> builtins.list[SearchHit]:
        """Events whose text holds every word of ``text``, best matches first."""
        db = await self._connect()
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
        async with db.execute(query, params) as rows:
            return [SearchHit(r[0], int(r[1]), r[2], r[3]) for r in await rows.fetchall()]


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
