"""Saving large tool output to a file, and previewing it for the model.

Files live in ``$DSH_HOME/spill/session-<hash>/``, private to the user, created
exclusively so nothing is overwritten. The model gets the head and the tail of the
text, the number of bytes left out, and the path to read the rest from.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from dsh.paths import PRIVATE_FILE, private_dir

MAX_INLINE_BYTES = 50_000


class SpillStore:
    def __init__(self, home: Path) -> None:
        self.root = home / "spill"

    def folder(self, session_id: str) -> Path:
        digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
        return self.root / f"session-{digest}"

    def save(self, session_id: str, label: str, text: str) -> Path:
        folder = private_dir(self.folder(session_id))
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:40] or "output"
        path = folder / f"{secrets.token_hex(6)}-{safe}.txt"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)
        return path


def preview(text: str, path: Path, limit: int = MAX_INLINE_BYTES) -> str:
    """Head and tail of ``text`` within ``limit`` bytes, with a notice of what was cut."""
    data = text.encode("utf-8", errors="replace")
    budget = max(1000, limit - 400)
    head = data[: budget * 2 // 3].decode("utf-8", errors="ignore")
    tail = data[-(budget // 3) :].decode("utf-8", errors="ignore")
    omitted = len(data) - len(head.encode()) - len(tail.encode())
    notice = (
        f"\n\n[... {omitted:,} bytes omitted; the whole output ({len(data):,} bytes) is in "
        f"{path}: read it with offset/limit, or grep it ...]\n\n"
    )
    return head + notice + tail
