"""``dsh sessions`` over damaged session logs, as a subprocess over a real $DSH_HOME.

A damaged record costs that record only, on both backends (JSONL and SQLite); a
damaged header costs what cannot be known without it; a forged seq is not believed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dsh.session import SessionStore
from tests.session.test_cli import dsh
from tests.session.turns import complete_turn

PROMPTS = [
    ("why is the build slow?", "The cache is cold."),
    ("rename the config loader", "Renamed to load_settings."),
    ("unrelated chat about tabs", "Use spaces."),
]


async def make_home(root: Path, backend: str = "jsonl") -> tuple[Path, list[str]]:
    """Three sessions (two in project/, one in root) and their ids, oldest first."""
    home = root / "home"
    project = root / "project"
    project.mkdir(exist_ok=True)
    store = SessionStore.at(home, backend)  # type: ignore[arg-type]
    ids = []
    for (prompt, reply), cwd in zip(PROMPTS, (project, project, root), strict=True):
        session = await store.create(str(cwd), model="deepseek-v4-flash")
        complete_turn(session, prompt, reply)
        await store.close(session)
        ids.append(session.id)
    await store.aclose()
    return home, ids


def log_of(home: Path, session_id: str) -> Path:
    [path] = home.glob(f"sessions/*/{session_id}/session.jsonl")
    return path


def said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def exported(home: Path, session_id: str, backend: str = "jsonl") -> list[dict[str, object]]:
    result = dsh(home, "export", session_id, backend=backend)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


# ---------------------------------------------------------------------- a damaged JSONL header


def damage_header(log: Path, how: str) -> None:
    lines = log.read_bytes().split(b"\n")
    header = lines[0]
    match how:
        case "bad byte in the model":
            at = header.index(b'"model"') + 1
            lines[0] = header[:at] + b"\xff" + header[at + 1 :]
        case "bad byte at the start":
            lines[0] = b"\xff" + header[1:]
        case "garbage":
            lines[0] = b"\x00\x13 garbage where the header was"
    log.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("how", ["bad byte in the model", "bad byte at the start"])
async def test_a_bad_byte_in_a_jsonl_header_costs_only_what_it_hid(
    tmp_path: Path, how: str
) -> None:
    home, ids = await make_home(tmp_path)
    (home / "index.sqlite").unlink()
    log = log_of(home, ids[1])
    before = exported(home, ids[1])
    damage_header(log, how)

    project = tmp_path / "project"
    listed = dsh(home, "list", cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 2, listed.stdout
    assert "rename the config loader" in listed.stdout
    shown = dsh(home, "show", ids[1][:8])
    assert shown.returncode == 0, shown.stderr
    assert "rename the config loader" in shown.stdout
    assert "Renamed to load_settings." in shown.stdout
    assert "header" in shown.stderr
    after = exported(home, ids[1])
    # Every event is there; the header kept what could be read of it.
    assert after[1:] == before[1:]
    assert after[0]["id"] == ids[1]
    assert after[0]["cwd"] == str(project)
    assert after[0]["createdAt"] == before[0]["createdAt"]


async def test_a_jsonl_header_lost_whole_still_gives_its_events(tmp_path: Path) -> None:
    home, ids = await make_home(tmp_path)
    log = log_of(home, ids[1])
    before = exported(home, ids[1])
    damage_header(log, "garbage")
    (home / "index.sqlite").unlink()

    listed = dsh(home, "list", "--all")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 3
    assert "rename the config loader" in listed.stdout
    shown = dsh(home, "show", ids[1])
    assert shown.returncode == 0, shown.stderr
    assert "Renamed to load_settings." in shown.stdout
    assert "header" in shown.stderr
    after = exported(home, ids[1])
    assert after[1:] == before[1:]
    assert after[0]["id"] == ids[1]
    assert after[0]["createdAt"] == before[1]["time"]  # known from its first event
    assert dsh(home, "reindex").stdout.strip() == "Indexed 3 session(s)."


# ---------------------------------------------------------------------- SQLite rows


def set_text(database: Path, query: str, value: bytes, *params: object) -> None:
    """Store ``value`` as TEXT whatever its bytes, as a damaged disk would."""
    with sqlite3.connect(database) as db:
        db.execute(query, (value, *params))
    db.close()


async def test_an_invalid_utf8_byte_in_a_sqlite_event_costs_that_event_only(
    tmp_path: Path,
) -> None:
    home, ids = await make_home(tmp_path, "sqlite")
    before = exported(home, ids[1], "sqlite")
    database = home / "sessions.sqlite"
    with sqlite3.connect(database) as db:
        [(data,)] = db.execute(
            "SELECT data FROM events WHERE session_id = ? AND type = 'user/message'", (ids[1],)
        ).fetchall()
    db.close()
    seq = next(r["seq"] for r in before[1:] if r["type"] == "user/message")
    broken = data.encode().replace(b"config", b"con\xfffig")
    set_text(
        database,
        "UPDATE events SET data = CAST(? AS TEXT) WHERE session_id = ? AND seq = ?",
        broken,
        ids[1],
        seq,
    )

    shown = dsh(home, "show", ids[1], backend="sqlite")
    assert shown.returncode == 0, shown.stderr
    assert "Renamed to load_settings." in shown.stdout
    assert "unreadable" in shown.stderr
    after = exported(home, ids[1], "sqlite")
    assert len(after) == len(before)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if a != b]
    assert [a["type"] for _, a in changed] == ["session/corrupt"]
    assert changed[0][1]["seq"] == seq
    # The other sessions are untouched.
    assert len(dsh(home, "list", "--all", backend="sqlite").stdout.splitlines()) == 3


@pytest.mark.parametrize("damage", [b'{"version": 0, "id": \xff', b"\xff\xfe not json at all"])
async def test_a_bad_sqlite_header_row_costs_that_header_only(
    tmp_path: Path, damage: bytes
) -> None:
    home, ids = await make_home(tmp_path, "sqlite")
    before = exported(home, ids[1], "sqlite")
    set_text(
        home / "sessions.sqlite",
        "UPDATE sessions SET header = CAST(? AS TEXT) WHERE id = ?",
        damage,
        ids[1],
    )
    (home / "index.sqlite").unlink()

    listed = dsh(home, "list", "--all", backend="sqlite")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 3
    assert "rename the config loader" in listed.stdout
    assert "Traceback" not in listed.stderr
    reindexed = dsh(home, "reindex", backend="sqlite")
    assert reindexed.stdout.strip() == "Indexed 3 session(s).", reindexed.stderr
    shown = dsh(home, "show", ids[1], backend="sqlite")
    assert shown.returncode == 0, shown.stderr
    assert "header" in shown.stderr
    after = exported(home, ids[1], "sqlite")
    assert after[1:] == before[1:]
    assert after[0]["cwd"] == before[0]["cwd"]  # the row's own columns say it
    assert after[0]["createdAt"] == before[0]["createdAt"]


# ---------------------------------------------------------------------- a forged seq


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
async def test_a_forged_seq_is_not_believed(tmp_path: Path, backend: str) -> None:
    home, ids = await make_home(tmp_path, backend)
    before = exported(home, ids[0], backend)
    forged = {"type": "x/forged", "seq": 1_000_000, "time": 1, "data": {}}
    if backend == "jsonl":
        log = log_of(home, ids[0])
        log.write_bytes(log.read_bytes() + json.dumps(forged).encode() + b"\n")
    else:
        with sqlite3.connect(home / "sessions.sqlite") as db:
            db.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
                (ids[0], 1_000_000, "x/forged", 1, "{}"),
            )
        db.close()

    after = exported(home, ids[0], backend)
    # The forged record costs itself (it is not read), never a million placeholders.
    assert len(after) <= len(before) + 1
    assert after[: len(before)] == before
    shown = dsh(home, "show", ids[0], backend=backend)
    assert shown.returncode == 0, shown.stderr
    assert "1000000" in shown.stderr
