"""The transcript of a recorded session as the TUI draws it, at a fixed size, compared
with the rendering kept beside it: a change to what people see shows as a diff.

Goldens are made with ``dsh replay FILE --render text --size 100x30 > GOLDEN``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dsh.kernel import Context, discover, load_vocabularies
from dsh.replay.export import read_replay_file
from dsh.replay.render import render_transcript
from tests.replay.test_recorded_sessions import FOLDER

SESSION = FOLDER / "tool-loops.json"
GOLDEN = FOLDER / "tool-loops.100x30.txt"
ROOT = Path(__file__).resolve().parents[2]


async def test_the_transcript_is_drawn_as_the_golden_holds_it() -> None:
    vocabulary = Context(name="test-vocabulary")
    await load_vocabularies(vocabulary, discover())
    try:
        _, events = read_replay_file(SESSION).loaded(str(SESSION))
        drawn = await render_transcript(events, width=100, height=30)
    finally:
        await vocabulary.dispose()
    assert drawn == GOLDEN.read_text()
    lines = drawn.splitlines()
    assert len(lines) == 30
    assert max(len(line) for line in lines) <= 100
    assert "out.txt holds the count." in drawn


def _replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh", "replay", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_drawing_that_changed_is_shown_as_a_diff(tmp_path: Path) -> None:
    same = _replay(str(SESSION), "--render", "text", "--expect", str(GOLDEN))
    assert same.returncode == 0, same.stderr
    changed = tmp_path / "golden.txt"
    changed.write_text(GOLDEN.read_text().replace("That file does not exist.", "It is there."))
    differs = _replay(str(SESSION), "--render", "text", "--expect", str(changed))
    assert differs.returncode == 1, differs.stderr
    assert "\n- It is there.\n+ That file does not exist.\n" in differs.stdout


def test_an_svg_is_drawn_at_the_size_asked() -> None:
    drawn = _replay(str(SESSION), "--render", "svg", "--size", "80x24")
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.startswith("<svg")
    assert "out.txt" in drawn.stdout.replace("&#160;", " ")


def test_a_bad_size_is_said() -> None:
    bad = _replay(str(SESSION), "--render", "text", "--size", "wide")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "dsh: a size is COLUMNSxROWS, such as 100x30, not 'wide'"
