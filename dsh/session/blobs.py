"""Content-addressed files beside a session's log: bytes an event refers to by digest.

An event holds a ``sha256`` digest, never the bytes, so a large attachment (an image)
costs the log a few dozen characters however often it is referred to, and is stored
once per session whatever its name. Each session's blobs live in one folder its
storage backend chooses (``blobs/`` beside ``session.jsonl``; ``blobs/<id>/`` beside
``sessions.sqlite``), readable by the user alone. The calls here block: run them in a
thread (:meth:`Blobs.aput`, :meth:`Blobs.aget`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

from dsh.paths import PRIVATE_FILE, private_dir

__all__ = ["Blobs", "digest_of", "is_digest"]

_DIGEST = re.compile(r"[0-9a-f]{64}")


def digest_of(data: bytes) -> str:
    """The name a blob is stored under: its sha256, in hex."""
    return hashlib.sha256(data).hexdigest()


def is_digest(value: str) -> bool:
    """Whether ``value`` can name a blob (a digest read from a log is checked before it
    becomes part of a path)."""
    return _DIGEST.fullmatch(value) is not None


class Blobs:
    """One session's blob folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, digest: str) -> Path:
        if not is_digest(digest):
            raise ValueError(f"not a blob digest: {digest[:80]!r}")
        return self.folder / digest

    def put(self, data: bytes) -> str:
        """Store ``data`` (once: a second put of the same bytes writes nothing) and
        return its digest."""
        digest = digest_of(data)
        target = self.path(digest)
        if target.is_file() and target.stat().st_size == len(data):
            return digest
        private_dir(self.folder)
        # Written aside and renamed, so a reader never sees half a blob.
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), PRIVATE_FILE)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return digest

    def get(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``; None when they are missing or do not
        match their name (a damaged or edited file is as good as missing)."""
        try:
            data = self.path(digest).read_bytes()
        except (OSError, ValueError):
            return None
        return data if digest_of(data) == digest else None

    async def aput(self, data: bytes) -> str:
        return await asyncio.to_thread(self.put, data)

    async def aget(self, digest: str) -> bytes | None:
        return await asyncio.to_thread(self.get, digest)
