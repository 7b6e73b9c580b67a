"""Running ``dsh -p`` as a real subprocess against the scripted server of the test.

The server runs in the test's event loop, so the child is driven with asyncio
subprocesses: a blocking ``subprocess.run`` would stall the server it talks to. Every
wait is bounded, and a child still running when a test ends is killed (by its pid).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from dsh.session import SessionEvent, SessionStore, check_log
from dsh.settings_tables import Backend
from dsh.testing import FakeLLM
from dsh.testing.reconstruct import check_requests
from dsh_plugins._shared.chat_completions import request_body
from dsh_plugins.llm_deepseek import DEFAULT_MODELS, UNKNOWN_MODEL
from tests.support.replays import check_session, failures_text, note_settings
from tests.support.vocabulary import async_plugin_vocabulary
from tests.support.waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent.parent
TIMEOUT = HANG_S  # any one wait: only a hang guard, never reached when sound
SETTINGS = '[plugins]\nmodules = ["tests.support.echo_tool"]\n'

# Variables of the developer's shell that would steer the child away from the test's
# home, server or key.
_CLEARED_PREFIXES = ("DSH_", "DEEPSEEK_", "OPENAI_")


@dataclass(frozen=True)
class Finished:
    code: int
    stdout: str
    stderr: str

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@dataclass
class Dsh:
    """One test's dsh installation: a home with the echo plugin, a project folder, and
    the server the child's DeepSeek route points at."""

    root: Path
    server: FakeLLM
    key: str | None = "sk-test"
    children: list[asyncio.subprocess.Process] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    """Variables the child gets on top of the test's (a ``HOME`` of its own...)."""
    wrapper: tuple[str, ...] = ()
    """A command the child runs under (it ends by running ``python -m dsh ARGS``), such
    as a cap on the size of the files it may write (tests/support/file_limit.py)."""
    backend: Backend = "jsonl"
    """Where the test reads the stored sessions from: set it with the settings'
    ``[storage] backend``."""

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        (self.home / "settings.toml").write_text(SETTINGS)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED_PREFIXES)}
        env.update(
            DSH_HOME=str(self.home),
            DEEPSEEK_BASE_URL=self.server.base_url,
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        if self.key is not None:
            env["DEEPSEEK_API_KEY"] = self.key
        env.update(self.environment)
        return env

    def home_of_its_own(self) -> Path:
        """Give the child an empty home folder of the test's own (``HOME``), so what
        a test plants or checks there is never the developer's."""
        home = self.root / "userhome"
        home.mkdir(exist_ok=True)
        self.environment["HOME"] = str(home)
        return home

    async def start(
        self,
        *args: str,
        cwd: Path | None = None,
        stdin: IO[Any] | int = asyncio.subprocess.PIPE,
        stdout: IO[Any] | int = asyncio.subprocess.PIPE,
        wrapper: Sequence[str] | None = None,
    ) -> asyncio.subprocess.Process:
        """``python -m dsh ARGS``, its streams piped unless told otherwise, run under
        ``wrapper`` (default: :attr:`wrapper`)."""
        env = self.env()
        note_settings(self.home, env)
        child = await asyncio.create_subprocess_exec(
            *(self.wrapper if wrapper is None else wrapper),
            sys.executable,
            "-m",
            "dsh",
            *args,
            cwd=cwd or self.project,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=asyncio.subprocess.PIPE,
        )
        self.children.append(child)
        return child

    async def run(self, *args: str, stdin: str = "", cwd: Path | None = None) -> Finished:
        """Run to the end, with ``stdin`` written and closed."""
        child = await self.start(*args, cwd=cwd)
        return await finish(child, stdin.encode())

    async def kill_leftovers(self) -> None:
        for child in self.children:
            if child.returncode is None:
                child.kill()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(child.wait(), TIMEOUT)

    # ------------------------------------------------------------------ the stored log

    async def session_ids(self) -> list[str]:
        """Every stored session, oldest first."""
        store = SessionStore.at(self.home, self.backend)
        try:
            headers = await store.persistence.list()
        finally:
            await store.aclose()
        return [h.id for h in sorted(headers, key=lambda h: h.created_at)]

    async def events(self, session_id: str | None = None) -> list[SessionEvent]:
        """The stored events of ``session_id``, or of the only session, read with the
        bundled plugins' event types, as dsh reads them."""
        if session_id is None:
            ids = await self.session_ids()
            assert len(ids) == 1, f"expected one session, found {ids}"
            session_id = ids[0]
        store = SessionStore.at(self.home, self.backend)
        try:
            async with async_plugin_vocabulary():
                loaded = await store.persistence.load(session_id)  # type: ignore[arg-type]
        finally:
            await store.aclose()
        assert loaded.issues == [], loaded.issues
        assert loaded.repaired == [], "the child left the log for crash repair"
        return loaded.events

    async def checked_events(self, session_id: str | None = None) -> list[SessionEvent]:
        """The stored events, after checking the log is sound and every request the
        server received can be rebuilt from it alone."""
        events = await self.events(session_id)
        assert check_log(events) == []
        check_requests(events, [r.body for r in self.server.chat_requests], body_for)
        await self.check_replay(session_id)
        return events

    async def check_replay(self, session_id: str | None = None) -> None:
        """The session replays identically (``dsh replay``, recorded tools) with the
        settings of this installation: every session the end-to-end tests check is a
        replay test too (and every other one: tests/e2e/conftest.py)."""
        if session_id is None:
            [session_id] = await self.session_ids()
        checked = await check_session(self.home, self.backend, session_id)
        assert checked.failure is None, failures_text([checked])


def body_for(options: Any) -> dict[str, Any]:
    return request_body(options, DEFAULT_MODELS.get(options.model, UNKNOWN_MODEL))


async def finish(child: asyncio.subprocess.Process, stdin: bytes | None = b"") -> Finished:
    """Write ``stdin`` (None: leave it as it is), then wait for the end."""
    try:
        if stdin is not None:
            out, err = await asyncio.wait_for(child.communicate(stdin), TIMEOUT)
        else:
            assert child.stderr is not None
            out, err = await asyncio.wait_for(
                asyncio.gather(_read_all(child.stdout), child.stderr.read()), TIMEOUT
            )
            await asyncio.wait_for(child.wait(), TIMEOUT)
    except TimeoutError:
        child.kill()
        raise AssertionError(f"dsh did not finish within {TIMEOUT} s") from None
    assert child.returncode is not None
    return Finished(child.returncode, (out or b"").decode(), (err or b"").decode())


async def _read_all(stream: asyncio.StreamReader | None) -> bytes:
    return await stream.read() if stream is not None else b""


async def send(child: asyncio.subprocess.Process, *commands: dict[str, Any]) -> None:
    """Write stream-json commands to the child's stdin."""
    assert child.stdin is not None
    child.stdin.write(b"".join(json.dumps(c).encode() + b"\n" for c in commands))
    await asyncio.wait_for(child.stdin.drain(), TIMEOUT)


async def close_stdin(child: asyncio.subprocess.Process) -> None:
    assert child.stdin is not None
    child.stdin.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await asyncio.wait_for(child.stdin.wait_closed(), TIMEOUT)


async def stream_events(child: asyncio.subprocess.Process) -> AsyncIterator[dict[str, Any]]:
    """The child's stream-json events as they arrive, each line bounded by TIMEOUT."""
    assert child.stdout is not None
    while True:
        try:
            line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"no event from dsh within {TIMEOUT} s") from None
        if not line:
            return
        yield json.loads(line)


async def read_until(child: asyncio.subprocess.Process, wanted: int) -> bytes:
    """At least ``wanted`` bytes of the child's stdout, as soon as they arrive."""
    assert child.stdout is not None
    seen = b""
    while len(seen) < wanted:
        try:
            more = await asyncio.wait_for(child.stdout.read(wanted - len(seen)), TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"dsh printed {seen!r} and then nothing") from None
        if not more:
            raise AssertionError(f"dsh closed stdout after {seen!r}")
        seen += more
    return seen


def interrupt(child: asyncio.subprocess.Process) -> None:
    child.send_signal(signal.SIGINT)


def of_type(events: Sequence[SessionEvent], type_: str) -> list[SessionEvent]:
    return [e for e in events if e.type == type_]


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of each user message of a request body."""
    return [text_of(m) for m in body["messages"] if m["role"] == "user"]


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
