"""The recorded sessions of tests/fixtures/replay replay identically with the code as it
is (record.py there makes them again). Each file is a test: a user's exported session
added to the folder is one more."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest

from dsh.host import HostFacts
from dsh.replay.export import read_replay_file
from dsh.testing.replay import assert_identical, replay_file_report, replay_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FOLDER = FIXTURES / "replay"
SUBSTITUTIONS = {"<python>": sys.executable, "<mcp-fixture>": str(FIXTURES / "mcp" / "server.py")}
"""The placeholders record.py leaves in a fixture's settings."""


def test_the_folder_holds_the_five_kinds_of_session() -> None:
    names = {path.stem for path in FOLDER.glob("*.json")}
    assert {"tool-loops", "compaction", "cancel-and-steer", "subagent", "mcp-call"} <= names


@replay_files(FOLDER)
async def test_a_recorded_session_replays_identically(replay_file: Path) -> None:
    report = await replay_file_report(replay_file, substitutions=SUBSTITUTIONS)
    assert_identical(report)
    assert len(report.steps) > 2  # requests, tool calls and turn ends were compared


async def test_a_session_replays_the_same_on_another_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The system prompt names the platform and the shell: a replay describes the
    recorded machine, not the one it runs on (CI has no $SHELL at all)."""
    monkeypatch.delenv("SHELL", raising=False)
    monkeypatch.setattr(platform, "release", lambda: "0.0-elsewhere")
    session = FOLDER / "tool-loops.json"
    header, _ = read_replay_file(session).loaded(str(session))
    assert header.host is not None
    assert header.host.login_shell != "unknown"
    assert HostFacts.this_machine() != header.host

    report = await replay_file_report(session, substitutions=SUBSTITUTIONS)

    assert_identical(report)
    assert not any("which machine" in note for note in report.notes)


async def test_a_log_that_does_not_name_its_machine_is_replayed_on_this_one(
    tmp_path: Path,
) -> None:
    document = json.loads((FOLDER / "tool-loops.json").read_text())
    del document["session"]["header"]["host"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(document))

    report = await replay_file_report(older, substitutions=SUBSTITUTIONS)

    assert any("does not say which machine" in note for note in report.notes)
    # This machine stood in: the prompt matches exactly when its facts are the
    # recorded ones, and the difference, when there is one, is named.
    recorded = read_replay_file(FOLDER / "tool-loops.json").loaded("x")[0].host
    if HostFacts.this_machine() == recorded:
        assert_identical(report)
    else:
        assert not report.identical
        assert "system prompt" in report.text()
