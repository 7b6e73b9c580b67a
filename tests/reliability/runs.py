"""Watching a ``dsh -p --output-format stream-json`` process from the outside.

:class:`Watched` reads the child's stdout (one JSON object a line) and stderr as they
arrive, stamping each line with the test's clock, so a test can wait for a moment of
the run (a chunk, a tool call, an approval request), kill the child there, and then
compare what the child said with what it left on disk. The flush probe's lines on
stderr (see :mod:`tests.reliability.flush_probe`) say which events were written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh.llm import SessionId
from dsh.session import SessionEvent
from dsh.session.jsonl import JsonlPersistence
from dsh.session.persistence import LoadedSession
from dsh.testing import FakeLLM
from dsh.testing.reconstruct import rebuild_requests
from tests.e2e.harness import Dsh, body_for
from tests.reliability.flush_probe import MARK
from tests.reliability.procs import Launcher, Proc

LONG = os.environ.get("DSH_LONG_TESTS") == "1"
"""The long local setting: more kills, more examples, bigger inputs."""

WAIT = 60.0  # seconds for any one wait: generous on a shared, loaded 2-core machine


def installation(root: Path, server: FakeLLM, extra_settings: str = "") -> Dsh:
    """A dsh home that loads the echo tool and the flush probe, and a project folder."""
    dsh = Dsh(root, server)
    (dsh.home / "settings.toml").write_text(
        '[plugins]\nmodules = ["tests.support.echo_tool", "tests.reliability.flush_probe"]\n'
        + extra_settings
    )
    return dsh


@dataclass
class Line:
    at: float  # time.monotonic() when the test read it
    value: dict[str, Any]


@dataclass
class Watched:
    """A running dsh, its output read into ``lines`` (stdout) and ``errors`` (stderr)."""

    proc: Proc
    started: float = field(default_factory=time.monotonic)
    lines: list[Line] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    written: list[tuple[float, int]] = field(default_factory=list)
    """(when, seq): the probe's reports that every event through seq is in the file."""
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def start(
        cls, launcher: Launcher, dsh: Dsh, argv: Sequence[str], cwd: Path | None = None
    ) -> Watched:
        proc = await launcher.start(argv, dsh.env(), cwd or dsh.project)
        watched = cls(proc)
        watched._readers = [
            asyncio.ensure_future(watched._read_stdout()),
            asyncio.ensure_future(watched._read_stderr()),
        ]
        return watched

    async def _read_stdout(self) -> None:
        while line := await self.proc.stdout.readline():
            if not line.endswith(b"\n"):
                break  # cut off by a kill
            with contextlib.suppress(ValueError):
                self.lines.append(Line(time.monotonic(), json.loads(line)))
            self._changed.set()
        self._changed.set()

    async def _read_stderr(self) -> None:
        while line := await self.proc.stderr.readline():
            text = line.decode(errors="replace").rstrip("\n")
            if text.startswith(MARK) and line.endswith(b"\n"):
                self.written.append((time.monotonic(), int(text[len(MARK) :])))
            else:
                self.errors.append(text)
            self._changed.set()
        self._changed.set()

    @property
    def events(self) -> list[Line]:
        """The session events printed (control lines such as approval requests left
        out), each as stored: without the ``sessionId`` every printed record carries."""
        return [
            Line(line.at, {k: v for k, v in line.value.items() if k != "sessionId"})
            for line in self.lines
            if "seq" in line.value
        ]

    @property
    def last_written(self) -> int:
        return max((seq for _, seq in self.written), default=-1)

    async def send(self, *commands: dict[str, Any]) -> None:
        self.proc.stdin.write(b"".join(json.dumps(c).encode() + b"\n" for c in commands))
        await asyncio.wait_for(self.proc.stdin.drain(), WAIT)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self.proc.stdin.close()

    async def until(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> Line:
        """The first stdout line ``wanted`` accepts, waiting for it as long as WAIT."""
        deadline = time.monotonic() + WAIT
        seen = 0
        while True:
            for line in self.lines[seen:]:
                if wanted(line.value):
                    return line
            seen = len(self.lines)
            if all(reader.done() for reader in self._readers):
                raise AssertionError(f"dsh ended before {what}:\n{self.tail()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {WAIT} s:\n{self.tail()}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    async def finish(self) -> int:
        """Wait for the child to end (stdin closed first) and for its output to drain."""
        self.close_stdin()
        try:
            code = await asyncio.wait_for(self.proc.wait(), WAIT)
            await asyncio.wait_for(asyncio.gather(*self._readers), WAIT)
        except TimeoutError:
            self.proc.kill()
            raise AssertionError(f"dsh did not finish within {WAIT} s:\n{self.tail()}") from None
        return code

    async def kill(self) -> float:
        """SIGKILL now; returns the moment, after waiting for the child and its output."""
        moment = time.monotonic()
        self.proc.kill()
        try:
            code = await asyncio.wait_for(self.proc.wait(), WAIT)
            await asyncio.wait_for(asyncio.gather(*self._readers), WAIT)
        except TimeoutError:
            raise AssertionError("a killed dsh did not go away") from None
        assert code == -9, f"dsh ended with {code} before the kill:\n{self.tail()}"
        return moment

    def tail(self) -> str:
        out = [json.dumps(line.value)[:300] for line in self.lines[-8:]]
        return "\n".join(["stdout:", *out, "stderr:", *self.errors[-20:]])


# ---------------------------------------------------------------------- the stored log


async def stored(home: Path, session_id: str) -> LoadedSession:
    """The session as a fresh process would find it, repaired in memory only."""
    persistence = JsonlPersistence(home)
    try:
        return await persistence.inspect(SessionId(session_id))
    finally:
        await persistence.close()


def kept(loaded: LoadedSession) -> list[SessionEvent]:
    """What the file holds: the loaded events without crash repair's additions."""
    return loaded.events[: len(loaded.events) - len(loaded.repaired)]


def dicts(events: Sequence[SessionEvent]) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(event.to_dict(), ensure_ascii=False)) for event in events]


def rebuilt_bodies(events: Sequence[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
    """(seq of its request/header, body) for every request the log can rebuild."""
    seqs = [event.seq for event in events if event.type == "request/header"]
    bodies = [body_for(options) for options in rebuild_requests(events)]
    return list(zip(seqs, bodies, strict=True))
