"""``dsh sessions`` over a damaged or stale index, as a subprocess over a real $DSH_HOME.

The index is derived data: damaged, missing or stale, it is rebuilt (or the stale
entry dropped) with one line saying so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.session.test_cli import dsh
from tests.session.test_cli_damaged_logs import log_of, make_home, said

# ---------------------------------------------------------------------- a damaged index


def garbage(index: Path) -> None:
    index.write_bytes(b"this is not a database, it is what a bad disk left\n" * 200)


def damaged_pages(index: Path) -> None:
    data = bytearray(index.read_bytes())
    # The SQLite header stays; every page after the first is overwritten.
    data[4096:] = b"\xa5" * (len(data) - 4096)
    index.write_bytes(bytes(data))


def foreign_tables(index: Path) -> None:
    index.unlink()
    with sqlite3.connect(index) as db:
        db.execute("CREATE TABLE sessions (name TEXT, size INTEGER)")
        db.execute("INSERT INTO sessions VALUES ('not', 1)")
    db.close()


@pytest.mark.parametrize("damage", [garbage, damaged_pages, foreign_tables])
async def test_a_damaged_index_is_rebuilt_with_one_line_saying_so(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    home, ids = await make_home(tmp_path)
    assert dsh(home, "list", "--all").returncode == 0  # the index is whole and has all three
    for suffix in ("-wal", "-shm"):
        (home / f"index.sqlite{suffix}").unlink(missing_ok=True)
    damage(home / "index.sqlite")

    listed = dsh(home, "list", "--all")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 3
    [line] = said(listed.stderr)
    assert "session index" in line, line
    assert "damaged" in line, line
    assert "rebuil" in line, line
    assert "Traceback" not in listed.stderr

    # Rebuilt: the next commands find everything and say nothing more.
    for args in (["show", ids[0][:8]], ["search", "cache", "cold"], ["list", "--all"]):
        result = dsh(home, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert said(result.stderr) == [], (args, result.stderr)
    assert "[cache]" in dsh(home, "search", "cache").stdout


@pytest.mark.parametrize("command", [["show"], ["export"], ["search", "tabs"], ["reindex"]])
async def test_every_reading_command_works_past_a_damaged_index(
    tmp_path: Path, command: list[str]
) -> None:
    home, ids = await make_home(tmp_path)
    garbage(home / "index.sqlite")
    args = [command[0], ids[2][:8]] if command[0] in ("show", "export") else command
    result = dsh(home, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [line] = said(result.stderr)
    assert "damaged" in line, line
    if command[0] == "reindex":
        assert result.stdout.strip() == "Indexed 3 session(s)."
    elif command[0] == "search":
        assert ids[2][:8] in result.stdout
    else:
        assert "unrelated chat about tabs" in result.stdout
    assert len(dsh(home, "list", "--all").stdout.splitlines()) == 3


# ---------------------------------------------------------------------- stale entries


@pytest.mark.parametrize("how", ["deleted", "emptied"])
async def test_an_entry_whose_log_is_gone_is_dropped_with_one_line(
    tmp_path: Path, how: str
) -> None:
    home, ids = await make_home(tmp_path)
    project = tmp_path / "project"
    assert len(dsh(home, "list", cwd=project).stdout.splitlines()) == 2
    log = log_of(home, ids[1])
    if how == "deleted":
        log.unlink()
    else:
        log.write_bytes(b"")

    listed = dsh(home, "list", cwd=project)
    assert listed.returncode == 0, listed.stderr
    [row] = listed.stdout.splitlines()
    assert "why is the build slow?" in row
    [line] = said(listed.stderr)
    assert ids[1][:8] in line, line
    assert "dropped from the index" in line, line
    again = dsh(home, "list", "--all")
    assert len(again.stdout.splitlines()) == 2
    assert said(again.stderr) == []
    missing = dsh(home, "show", ids[1])
    assert missing.returncode == 1
    assert missing.stderr.startswith("dsh: ")
    assert "Traceback" not in missing.stderr
