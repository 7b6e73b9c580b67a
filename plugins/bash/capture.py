"""One output stream of a shell command: its tail in memory, the whole of it in a file.

A command may print gigabytes, so memory holds only the last ``TAIL_BYTES`` of each
stream. Once a stream outgrows that, everything it printed (from the first byte) goes
to a spill file, up to ``SPILL_CAP_BYTES``; past the cap the file stops growing and the
rendered output says how much it is missing. Small outputs never touch the disk.

Spill files hold the stream decoded as UTF-8 (undecodable bytes replaced), so the
``read`` and ``grep`` tools can open them; for valid UTF-8 that is the bytes as printed.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from dsh.paths import PRIVATE_FILE, dsh_home, private_dir
from dsh.tools import ToolContext

TAIL_BYTES = 64_000
SPILL_CAP_BYTES = 64 * 1024 * 1024

_log = logging.getLogger("dsh.plugins.bash")

SpillOpener = Callable[[str], Path]
"""Makes a new, empty, private file for a stream (named after ``label``); its path."""


def spill_opener(context: ToolContext) -> SpillOpener:
    """Where a call's streams spill: the pipeline's spill store when it offers one
    (an empty text makes the file, the stream is appended as it arrives), else the
    same layout under ``$DSH_HOME/spill``."""
    spill = context.spill
    if spill is not None:
        return lambda label: spill("", label)
    session = str(context.session_id)
    return lambda label: new_spill_file(session, label)


def new_spill_file(session_id: str, label: str) -> Path:
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
    folder = private_dir(dsh_home() / "spill" / f"session-{digest}")
    path = folder / f"{secrets.token_hex(8)}-{label}.txt"
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE))
    return path


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


class StreamCapture:
    """Bytes fed as they arrive; see the module docstring."""

    def __init__(self, label: str, open_spill: SpillOpener | None) -> None:
        self.label = label
        self._open_spill = open_spill
        self.total = 0
        """Bytes the stream has carried so far."""
        self._tail = bytearray()
        self.spill_path: Path | None = None
        self.spill_error: str | None = None
        self.saved = 0
        """Bytes of the stream that reached the spill file."""
        self._written = 0
        self._file: BinaryIO | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    # ------------------------------------------------------------------ feeding

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if (
            self.total + len(data) > TAIL_BYTES
            and self.spill_path is None
            and self.spill_error is None
        ):
            # Nothing has been dropped yet, so the tail is the whole stream so far.
            self._begin_spill()
        self.total += len(data)
        if self._file is not None:
            self._save(data)
        if len(data) >= TAIL_BYTES:
            self._tail[:] = data[-TAIL_BYTES:]
        else:
            self._tail += data
            excess = len(self._tail) - TAIL_BYTES
            if excess > 0:
                del self._tail[:excess]

    def close(self) -> None:
        """The stream has ended (or is no longer read): finish the spill file."""
        if self._file is None:
            return
        try:
            rest = self._decoder.decode(b"", final=True).encode()
            if rest and self._written + len(rest) <= SPILL_CAP_BYTES:
                self._file.write(rest)
            self._file.close()
        except OSError as error:
            self._fail(error)
        self._file = None

    def _begin_spill(self) -> None:
        if self._open_spill is None:
            self.spill_error = "no spill store"
            return
        try:
            self.spill_path = self._open_spill(self.label)
            self._file = open(self.spill_path, "ab")  # noqa: SIM115 - open for the stream's life
        except OSError as error:
            self._fail(error)
            return
        self._save(bytes(self._tail))

    def _save(self, data: bytes) -> None:
        assert self._file is not None
        room = SPILL_CAP_BYTES - self._written
        encoded = self._decoder.decode(data).encode()
        if len(encoded) > room:
            encoded = encoded[:room]
            data = data[:room]  # close enough when replacement characters changed sizes
        try:
            self._file.write(encoded)
        except OSError as error:
            self._fail(error)
            return
        self._written += len(encoded)
        self.saved += len(data)
        if self._written >= SPILL_CAP_BYTES:
            # The cap is reached: stop writing, keep reading (the command must not block).
            self._file.close()
            self._file = None

    def _fail(self, error: OSError) -> None:
        _log.warning("bash output spill failed: %s", error)
        self.spill_error = error.strerror or str(error)
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    # ------------------------------------------------------------------ reading

    @property
    def start(self) -> int:
        """The stream offset of the first byte still in memory."""
        return self.total - len(self._tail)

    @property
    def truncated(self) -> bool:
        return self.start > 0

    @property
    def spilled(self) -> bool:
        return self.spill_path is not None

    def text(self) -> str:
        """What memory holds, decoded; when the start was cut away, from the first
        whole line on (never half a line, nor half a character)."""
        tail = bytes(self._tail)
        if self.truncated:
            tail = tail[_continuation_prefix(tail) :]
            end_of_cut_line = tail.find(b"\n")
            if 0 <= end_of_cut_line < len(tail) - 1:
                tail = tail[end_of_cut_line + 1 :]
        return tail.decode("utf-8", "replace")

    def read_since(self, cursor: int, *, final: bool) -> tuple[str, int, int]:
        """Text printed since stream offset ``cursor``: (text, next cursor, bytes lost
        because they left memory before this read). Unless ``final``, an incomplete
        character at the end waits for the next read."""
        lost = max(0, self.start - cursor)
        begin = max(cursor, self.start)
        chunk = bytes(self._tail[begin - self.start :])
        if lost:
            skip = _continuation_prefix(chunk)
            chunk, begin = chunk[skip:], begin + skip
        if not final:
            chunk = chunk[: len(chunk) - _incomplete_suffix(chunk)]
        return chunk.decode("utf-8", "replace"), begin + len(chunk), lost

    def notes(self) -> list[str]:
        """The marker lines saying where the whole stream is, when memory lost part."""
        if not self.truncated:
            return []
        if self.spill_path is None:
            return [f"[output truncated; the full output could not be saved: {self.spill_error}]"]
        notes = [f"[output truncated; full output: {self.spill_path}]"]
        if self.spill_error is not None:
            notes.append(f"[the full output file is incomplete: {self.spill_error}]")
        elif self.saved < self.total:
            notes.append(
                f"[the full output file stops at {_mib(SPILL_CAP_BYTES)}; "
                f"the last {self.total - self.saved} bytes were not saved]"
            )
        return notes


def _continuation_prefix(data: bytes) -> int:
    """How many UTF-8 continuation bytes (at most 3) open ``data``."""
    count = 0
    while count < min(3, len(data)) and data[count] & 0xC0 == 0x80:
        count += 1
    return count


def _incomplete_suffix(data: bytes) -> int:
    """How many bytes at the end of ``data`` start a UTF-8 character they don't finish."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: its lead is further back
        if byte >= 0xF0:
            need = 4
        elif byte >= 0xE0:
            need = 3
        elif byte >= 0xC0:
            need = 2
        else:
            return 0
        return back if back < need else 0
    return 0
