"""The recorded sessions of tests/fixtures/replay replay identically with the code as it
is (record.py there makes them again). Each file is a test: a user's exported session
added to the folder is one more."""

from __future__ import annotations

import sys
from pathlib import Path

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
