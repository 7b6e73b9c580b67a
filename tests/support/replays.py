"""Every session an end-to-end test stored replays identically (``dsh replay``, recorded
tools): the check :func:`tests.e2e.conftest` runs after each passing test, and
:meth:`tests.e2e.harness.Dsh.check_replay` for one session.

A test's dsh homes are found by what dsh stores in one (``sessions/`` of the JSONL
backend, ``sessions.sqlite`` of the SQLite one), wherever the test put them: its own
``tmp_path`` (``Dsh.home``, ``child_env``'s home, a ``HOME/.dsh``...) and the private
``$DSH_HOME`` every test gets (tests/conftest.py). Each stored session is read as it
is (nothing is repaired on disk) and replayed with that home's ``settings.toml``.

What is replayed, and what is not (each skip says why, in :class:`Checked`):

- every top-level session that sent the model at least one request;
- a subagent's own session (``origin = "subagent"``) is not replayed alone: its parent's
  replay answers the ``task`` call with the recorded result, and the child's own
  requests were built from its preset's prompt and tools, which a replay of the child
  as a session of its own would not have;
- a session with no request (opened and closed, or a command only) has nothing to
  compare.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh.session import SessionHeader, SessionStore
from dsh.session.jsonl import FILE_NAME as JSONL_FILE
from dsh.session.sqlite import FILE_NAME as SQLITE_FILE
from dsh.settings_tables import Backend
from tests.support.vocabulary import async_plugin_vocabulary

# Folders no dsh home is ever in, and which can be large: an installed environment, a
# package manager's tree, a repository's objects.
_NOT_HOMES = frozenset({".venv", "venv", "node_modules", ".git", "site-packages", "__pycache__"})

_settings_history: dict[Path, list[tuple[float, str, tuple[str, ...]]]] = {}
"""By home: the settings each dsh a test started found there (with its ``PYTHONPATH``),
and when (ms), so a session is replayed with the settings it ran with even where the
test rewrote them for a later run. Kept in this process, never in the home: a test may
fill its home's disk or make it read-only."""

_identical: set[tuple[Path, Backend, str, int]] = set()
"""The sessions (with how many events they held) that replayed identically in this
process: a test's own check (``Dsh.checked_events``) is not repeated after it."""


@dataclass(frozen=True)
class Checked:
    """One stored session and what its replay found (``failure``), or why it was not
    replayed (``skipped``)."""

    home: Path
    backend: Backend
    session_id: str
    failure: str | None = None
    skipped: str | None = None


def dsh_homes(*roots: Path) -> list[Path]:
    """Every folder under ``roots`` (themselves included) that holds stored sessions."""
    found: list[Path] = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            here = Path(folder)
            if SQLITE_FILE in files or _holds_jsonl_sessions(here / "sessions"):
                found.append(here)
            dirs[:] = [d for d in dirs if d not in _NOT_HOMES and not d.startswith("dsh-replay-")]
    return sorted(set(found))


def _holds_jsonl_sessions(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob(f"*/*/{JSONL_FILE}"))


def _backends(home: Path) -> list[Backend]:
    backends: list[Backend] = []
    if _holds_jsonl_sessions(home / "sessions"):
        backends.append("jsonl")
    if (home / SQLITE_FILE).is_file():
        backends.append("sqlite")
    return backends


def note_settings(home: Path, environ: Mapping[str, str] | None = None) -> None:
    """Keep ``home``'s settings as they are now, when a dsh is about to start there with
    ``environ``: its ``PYTHONPATH`` too, where a plugin of its own may be (a site the
    test built), which the replay imports as the child did."""
    settings_file = home / "settings.toml"
    text = settings_file.read_text() if settings_file.is_file() else ""
    paths = (environ or {}).get("PYTHONPATH", "")
    entry = (time.time() * 1000, text, tuple(p for p in paths.split(os.pathsep) if p))
    _settings_history.setdefault(home.resolve(), []).append(entry)


@dataclass(frozen=True)
class Started:
    """How a dsh was started in a home: its settings, and where it imported from."""

    settings: str
    paths: tuple[str, ...] = ()


def started_for(home: Path, created_at: float) -> Started:
    """How the dsh that created a session at ``created_at`` (ms) was started: the last
    noted before it (:func:`note_settings`), else with the home's settings as they are."""
    noted = _settings_history.get(home.resolve(), [])
    before = [entry for entry in noted if entry[0] <= created_at]
    if before:
        _, text, paths = before[-1]
        return Started(text, paths)
    settings_file = home / "settings.toml"
    return Started(settings_file.read_text() if settings_file.is_file() else "")


@contextlib.contextmanager
def importable(paths: Sequence[str]) -> Iterator[None]:
    """``paths`` on ``sys.path`` (those not on it already) for as long as it lasts."""
    added = [path for path in paths if path not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for path in added:
            sys.path.remove(path)


async def check_home(home: Path) -> list[Checked]:
    """Replay every session stored in ``home`` (both backends), oldest first."""
    checked: list[Checked] = []
    for backend in _backends(home):
        store = SessionStore.at(home, backend)
        try:
            headers = await store.persistence.list()
        finally:
            await store.aclose()
        for header in sorted(headers, key=lambda h: h.created_at):
            checked.append(await check_session(home, backend, header.id))
    return checked


async def check_homes(homes: Iterable[Path]) -> list[Checked]:
    return [result for home in homes for result in await check_home(home)]


async def check_session(home: Path, backend: Backend, session_id: str) -> Checked:
    """Replay one stored session with ``home``'s settings, recorded tools."""
    from dsh.replay.compare import compare
    from dsh.replay.recorded import read_recording
    from dsh.replay.run import ReplayOptions, replay

    store = SessionStore.at(home, backend)
    try:
        async with async_plugin_vocabulary():
            loaded = await store.persistence.inspect(session_id)  # type: ignore[arg-type]
            key = (home, backend, session_id, len(loaded.events))
            if key in _identical:
                return Checked(home, backend, session_id, skipped="replayed by the test itself")
            skipped = _not_replayed(loaded.header, [e.type for e in loaded.events])
            if skipped is not None:
                return Checked(home, backend, session_id, skipped=skipped)
            started = started_for(home, loaded.header.created_at)
            with importable(started.paths):
                run = await replay(
                    read_recording(loaded.header, loaded.events),
                    ReplayOptions(settings=started.settings),
                )
    finally:
        await store.aclose()
    report = compare(run)
    if report.identical:
        _identical.add(key)
        return Checked(home, backend, session_id)
    return Checked(home, backend, session_id, failure=report.text())


def _not_replayed(header: SessionHeader, types: list[str]) -> str | None:
    if header.origin == "subagent":
        return "a subagent's session: its parent's replay answers its task call as recorded"
    if "request/header" not in types:
        return "no request to the model: nothing to compare"
    return None


def failures_text(checked: Iterable[Checked]) -> str:
    """The report of every session that did not replay, or ``""``."""
    return "\n\n".join(
        f"session {c.session_id} ({c.backend}, {c.home}) does not replay:\n{c.failure}"
        for c in checked
        if c.failure is not None
    )
