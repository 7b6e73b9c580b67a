"""The SQLite files dsh keeps (the SQLite session store, the session index): opening
one private and in WAL mode, or read-only where it cannot be written, and telling
what a failure means: the file is damaged, or it cannot be written (a full or
read-only disk), or something else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiosqlite

from dsh.paths import PRIVATE_FILE, private_dir

_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_UNWRITABLE = frozenset(
    {
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_PERM,
    }
)


def _primary_code(error: BaseException) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_damaged(error: BaseException) -> bool:
    """Whether ``error`` says the file is not a sound SQLite database."""
    return _primary_code(error) in _DAMAGED


def cannot_write(error: BaseException) -> bool:
    """Whether ``error`` says the file (or its folder) cannot be written or made: a
    full or read-only disk, missing permissions, an I/O failure."""
    return isinstance(error, OSError) or _primary_code(error) in _UNWRITABLE


def reason(error: BaseException) -> str:
    """``error`` in a few words, for a message that names the file itself."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


async def open_database(path: Path | str, *, uri: bool = False) -> aiosqlite.Connection:
    """An aiosqlite connection whose worker thread never keeps the process alive.

    aiosqlite runs each connection on a non-daemon thread, so one connection left open
    by mistake would hang the interpreter at exit. Every write here is awaited to its
    commit, so a daemon thread loses nothing when the process ends.
    """
    connection = aiosqlite.connect(path, uri=uri)
    thread = getattr(connection, "_thread", None)
    if thread is not None and not thread.is_alive():
        thread.daemon = True
    return await connection


def read_only_uris(path: Path) -> tuple[str, str]:
    """How to open ``path`` without writing it: ``mode=ro`` reads a WAL database as
    long as its shared-memory file exists or can be made; on a read-only disk where
    it cannot, ``immutable=1`` reads the file as it stands (nobody can change it)."""
    base = path.absolute().as_uri()
    return (f"{base}?mode=ro", f"{base}?immutable=1")


async def open_read_only(path: Path) -> aiosqlite.Connection:
    """A connection that only reads ``path``; raises what the last way tried raised."""
    failure: BaseException | None = None
    for address in read_only_uris(path):
        db = await open_database(address, uri=True)
        try:
            # Opening is lazy: the first read is what fails.
            await db.execute("SELECT count(*) FROM sqlite_master")
        except sqlite3.Error as error:
            await db.close()
            failure = error
            continue
        return db
    assert failure is not None
    raise failure


async def open_private(
    path: Path,
    schema: str,
    pragmas: tuple[str, ...],
    *,
    check: Callable[[aiosqlite.Connection], Awaitable[None]] | None = None,
) -> aiosqlite.Connection:
    """``path`` opened for writing: made private to the user (0600 in a 0700 folder)
    if it is new, in WAL mode, with its schema applied (after ``check``, which raises
    when what the file already holds is not what the schema is for)."""

    def make() -> None:
        private_dir(path.parent)
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE))

    await asyncio.to_thread(make)
    db = await open_database(path)
    try:
        for pragma in ("journal_mode=WAL", *pragmas):
            await db.execute(f"PRAGMA {pragma}")
        if check is not None:
            await check(db)
        await db.executescript(schema)
        await db.commit()
    except BaseException:
        with contextlib.suppress(Exception):
            await db.close()
        raise
    return db


def identity(path: Path) -> tuple[int, int, int]:
    """The device, inode and size of ``path``: what tells that a file still is the one
    a connection opened, and has not been cut short."""
    status = os.stat(path)
    return (status.st_dev, status.st_ino, status.st_size)


class PrivateDatabase:
    """One SQLite file opened on first use (see :func:`open_private`). Where it cannot
    be written (a read-only or full disk) but exists, it is opened read-only, so that
    what it holds can still be read; ``read_only`` then says why, and writes fail.
    Once closed it stays closed: reopening would start a worker thread that nobody
    closes."""

    def __init__(
        self, path: Path, schema: str, *, label: str, pragmas: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        self._schema = schema
        self._label = label
        self._pragmas = pragmas
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self.read_only: str | None = None
        """Why the file was opened read-only, when it was."""
        self.opened: tuple[int, int, int] | None = None
        """:func:`identity` of the file when it was opened."""

    async def connect(self) -> aiosqlite.Connection:
        async with self._opening:
            if self._closed:
                raise RuntimeError(f"the {self._label} is closed")
            if self._db is None:
                try:
                    db = await open_private(self.path, self._schema, self._pragmas)
                except (sqlite3.Error, OSError) as error:
                    if not (cannot_write(error) and self.path.exists()):
                        raise
                    db = await open_read_only(self.path)
                    self.read_only = reason(error)
                try:
                    self.opened = await asyncio.to_thread(identity, self.path)
                except OSError:
                    self.opened = None
                self._db = db
            return self._db

    async def close(self) -> None:
        self._closed = True
        async with self._opening:
            if self._db is not None:
                await self._db.close()
                self._db = None
