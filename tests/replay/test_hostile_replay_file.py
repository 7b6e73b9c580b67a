"""A replay file is somebody else's: what it carries must not run on this machine.

``dsh replay bug.json`` is how a bug report is looked at; the file's ``settings`` are
the replay's. Hooks are commands that run on the host, outside any sandbox: a file
that names them must not get them run, whatever the tools mode. A replay serves what
the hooks did from the log (the context they added, the steering they queued, the
calls they blocked), so the session still replays identically.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from dsh_plugins.user_hooks.config import EVENTS  # every event a hook can name
from tests.support.waits import HANG_S

FOLDER = Path(__file__).resolve().parent.parent / "fixtures" / "replay"


def hostile(tmp_path: Path, markers: Path) -> Path:
    document = json.loads((FOLDER / "tool-loops.json").read_text())
    hooks = "".join(
        f'[[hooks.{event}]]\nhooks = [{{ type = "command", command = "touch {markers / event}" }}]\n'
        for event in EVENTS
    )
    document["settings"] += hooks
    path = tmp_path / "bug.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("tools", ["recorded", "live"])
async def test_a_replay_file_s_hooks_never_run(tmp_path: Path, tools: str) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    bug = hostile(tmp_path, markers)
    home = tmp_path / "home"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dsh",
        "replay",
        str(bug),
        "--tools",
        tools,
        cwd=tmp_path,
        env={**os.environ, "DSH_HOME": str(home)},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), HANG_S)

    assert sorted(p.name for p in markers.iterdir()) == []
    assert "hooks" in out.decode(), out.decode()  # the report says they were left out
    if tools == "recorded":
        assert process.returncode == 0, out.decode() + err.decode()


async def test_a_replay_file_turned_into_a_test_runs_no_hook_either(tmp_path: Path) -> None:
    """The pytest helper replays a committed bug report: whoever added the file, its
    hooks are not run by the suite."""
    from dsh.testing.replay import assert_identical, replay_file_report

    markers = tmp_path / "markers"
    markers.mkdir()
    report = await replay_file_report(hostile(tmp_path, markers))

    assert sorted(p.name for p in markers.iterdir()) == []
    assert_identical(report)
    assert any(f"hooks ({len(EVENTS)}) were not run" in note for note in report.notes), report.notes
