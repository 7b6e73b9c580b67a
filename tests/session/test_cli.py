"""``dsh sessions`` end to end, as a subprocess over a real $DSH_HOME."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.session import SessionStore
from tests.session.turns import complete_turn


def dsh(
    home: Path, *args: str, cwd: Path | None = None, backend: str = "jsonl"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSH_HOME": str(home), "DSH_PERSISTENCE_BACKEND": backend}
    return subprocess.run(
        [sys.executable, "-m", "dsh", "sessions", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
async def home(tmp_path: Path) -> Path:
    """Two sessions in project/ and one elsewhere."""
    data = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    store = SessionStore.at(data)
    for cwd, prompt, reply in [
        (project, "why is the build slow?", "The cache is cold."),
        (project, "rename the config loader", "Renamed to load_settings."),
        (tmp_path, "unrelated chat about tabs", "Use spaces."),
    ]:
        session = await store.create(str(cwd))
        complete_turn(session, prompt, reply)
        await store.close(session)
    await store.aclose()
    return data


def test_list_shows_this_directorys_sessions_newest_first(home: Path) -> None:
    project = home.parent / "project"
    result = dsh(home, "list", cwd=project)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert "rename the config loader" in lines[0]
    assert "why is the build slow?" in lines[1]
    everything = json.loads(dsh(home, "list", "--all", "--json").stdout)
    assert len(everything) == 3
    assert {row["turns"] for row in everything} == {1}


def test_search_show_export_and_remove(home: Path, tmp_path: Path) -> None:
    found = dsh(home, "search", "cache", "cold")
    assert found.returncode == 0
    [hit] = found.stdout.splitlines()
    prefix = hit.split()[0]
    assert "[cache]" in hit

    shown = dsh(home, "show", prefix)
    assert shown.returncode == 0
    assert "## User\n\nwhy is the build slow?" in shown.stdout
    assert "**Tool call** `read`" in shown.stdout

    markdown = tmp_path / "out.md"
    assert dsh(home, "export", prefix, "--format", "markdown", "-o", str(markdown)).returncode == 0
    assert markdown.read_text() == shown.stdout

    exported = dsh(home, "export", prefix).stdout
    assert json.loads(exported.splitlines()[0])["type"] == "session"

    refused = dsh(home, "rm", prefix)
    assert refused.returncode == 1
    assert "--yes" in refused.stderr
    assert dsh(home, "rm", prefix, "--yes").returncode == 0
    assert dsh(home, "search", "cache").stdout.startswith("Nothing found")
    missing = dsh(home, "show", prefix)
    assert missing.returncode == 1
    assert "no stored session" in missing.stderr


def test_export_from_jsonl_and_import_into_sqlite(home: Path, tmp_path: Path) -> None:
    rows = json.loads(dsh(home, "list", "--all", "--json").stdout)
    [row] = [r for r in rows if r["firstPrompt"] == "unrelated chat about tabs"]
    export = tmp_path / "s.jsonl"
    export.write_text(dsh(home, "export", row["id"]).stdout)
    other = tmp_path / "other-home"
    imported = dsh(other, "import", str(export), backend="sqlite")
    assert imported.returncode == 0, imported.stderr
    assert "Imported session" in imported.stdout
    shown = dsh(other, "show", row["id"][:8], backend="sqlite")
    assert "unrelated chat about tabs" in shown.stdout
    again = dsh(other, "import", str(export), backend="sqlite")
    assert again.returncode == 1
    assert "already stored" in again.stderr


def test_a_lost_index_is_found_again_and_rebuilt(home: Path) -> None:
    (home / "index.sqlite").unlink()
    for suffix in ("-wal", "-shm"):
        (home / f"index.sqlite{suffix}").unlink(missing_ok=True)
    # What the index misses, listing finds in storage and indexes on the way.
    assert len(dsh(home, "list", "--all").stdout.splitlines()) == 3
    result = dsh(home, "reindex")
    assert result.stdout.strip() == "Indexed 3 session(s)."
    assert len(dsh(home, "list", "--all").stdout.splitlines()) == 3


def test_an_empty_id_is_a_clear_error(home: Path) -> None:
    result = dsh(home, "show", "")
    assert result.returncode == 1
    assert result.stderr.startswith("dsh: ")


def test_a_plugins_events_read_as_a_running_dsh_reads_them(tmp_path: Path) -> None:
    # No plugin runs in `dsh sessions`, but their event types are registered before a
    # log is read: the title plugin's title heads the session, and the calls of the
    # summary and the titles count, on import, on a rebuilt index and in the export.
    home = tmp_path / "home"
    log = Path(__file__).parent / "fixtures" / "plugin_events.jsonl"
    assert dsh(home, "import", str(log)).returncode == 0

    def row() -> dict[str, object]:
        [only] = json.loads(dsh(home, "list", "--all", "--json").stdout)
        assert isinstance(only, dict)
        return only

    imported = row()
    assert imported["title"] == "IO test: fixed and faster"
    # Four answers of 100 uncached input tokens, the summary's 5,000 and the title's 300.
    assert imported["inputTokens"] == 5700
    shown = dsh(home, "show", str(imported["id"]))
    assert shown.stdout.startswith("# IO test: fixed and faster\n")

    (home / "index.sqlite").unlink()
    for suffix in ("-wal", "-shm"):
        (home / f"index.sqlite{suffix}").unlink(missing_ok=True)
    assert row() == imported  # found again in storage, and indexed the same
    assert dsh(home, "reindex").returncode == 0
    assert row() == imported


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
async def test_export_into_a_reader_that_left_ends_quietly(tmp_path: Path, fmt: str) -> None:
    # `dsh sessions export ID | head`: the reader is gone when the export is written.
    # It printed a BrokenPipeError traceback.
    data = tmp_path / "home"
    store = SessionStore.at(data)
    session = await store.create(str(tmp_path))
    for n in range(20):
        complete_turn(session, f"question {n} " + "x" * 4000, f"answer {n}")
    session_id = str(session.id)
    await store.close(session)
    await store.aclose()
    env = {**os.environ, "DSH_HOME": str(data)}
    command = [sys.executable, "-m", "dsh", "sessions", "export", session_id, "--format", fmt]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has left before a byte is written
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            command,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)

    assert done.stderr.decode() == ""  # no traceback, no "Broken pipe"
    assert done.returncode == 141
