"""``dsh sessions fork`` and ``show`` of a rewound session, as a subprocess over a real
$DSH_HOME, with either storage backend."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh.session import SessionStore, turns
from dsh.session.payloads import HistoryRewound
from tests.session.test_cli import dsh
from tests.session.turns import complete_turn


@pytest.fixture(params=["jsonl", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def rewound_session(home: Path, cwd: Path, backend: str) -> str:
    """Three turns; the third rewound; a fourth in its place."""
    store = SessionStore.at(home, backend)  # type: ignore[arg-type]
    try:
        session = await store.create(str(cwd))
        for prompt, reply in [("first ask", "one"), ("second ask", "two"), ("third ask", "three")]:
            complete_turn(session, prompt, reply, with_tool=False)
        third = turns(session)[2]
        session.append("history/rewound", HistoryRewound(turn=3, to_seq=third.start_seq))
        complete_turn(session, "fourth ask", "four", with_tool=False)
        await store.close(session)
        return str(session.id)
    finally:
        await store.aclose()


async def test_fork_at_a_turn_prints_the_new_session_and_how_to_resume_it(
    tmp_path: Path, backend: str
) -> None:
    home = tmp_path / "home"
    session_id = await rewound_session(home, tmp_path, backend)

    result = dsh(home, "fork", session_id[:8], "--at", "2", cwd=tmp_path, backend=backend)
    assert result.returncode == 0, result.stderr
    found = re.search(r"into ([0-9a-f-]{36})\.", result.stdout)
    assert found, result.stdout
    fork_id = found.group(1)
    assert f"Forked session {session_id} at turn 2 into {fork_id}." in result.stdout
    assert f"Resume it with: dsh --resume {fork_id}" in result.stdout

    store = SessionStore.at(home, backend)  # type: ignore[arg-type]
    try:
        fork = await store.open(fork_id)
        assert [m.text().strip() for m in fork.derive_messages()] == [
            "first ask",
            "one",
            "second ask",
            "two",
        ]
        assert fork.header.parent_session == session_id
    finally:
        await store.aclose()

    shown = dsh(home, "show", fork_id, cwd=tmp_path, backend=backend)
    assert f"Forked from: `{session_id}`" in shown.stdout
    listed = dsh(home, "list", cwd=tmp_path, backend=backend)
    assert fork_id[:8] in listed.stdout


async def test_fork_without_a_turn_continues_from_the_last_one(
    tmp_path: Path, backend: str
) -> None:
    home = tmp_path / "home"
    session_id = await rewound_session(home, tmp_path, backend)
    result = dsh(home, "fork", session_id, cwd=tmp_path, backend=backend)
    assert result.returncode == 0, result.stderr
    assert "at its last finished turn" in result.stdout


async def test_a_fork_at_a_turn_not_there_is_a_clear_error(tmp_path: Path, backend: str) -> None:
    home = tmp_path / "home"
    session_id = await rewound_session(home, tmp_path, backend)
    missing = dsh(home, "fork", session_id, "--at", "9", cwd=tmp_path, backend=backend)
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"dsh: cannot fork session {session_id} at turn 9: there is no turn 9; the turns are 1-4"
    )
    zero = dsh(home, "fork", session_id, "--at", "0", cwd=tmp_path, backend=backend)
    assert zero.returncode == 1
    assert zero.stderr.strip() == "dsh: --at takes a turn number (1 or more), not 0"
    word = dsh(home, "fork", session_id, "--at", "two", cwd=tmp_path, backend=backend)
    assert word.returncode == 2
    assert "invalid int value: 'two'" in word.stderr
    # Nothing was made by any of them.
    listed = dsh(home, "list", cwd=tmp_path, backend=backend)
    assert len(listed.stdout.splitlines()) == 1


async def test_show_and_export_mark_what_a_rewind_took_back(tmp_path: Path, backend: str) -> None:
    home = tmp_path / "home"
    session_id = await rewound_session(home, tmp_path, backend)
    shown = dsh(home, "show", session_id, cwd=tmp_path, backend=backend)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "## User\n\nfirst ask" in text
    assert "## User (rewound)\n\nthird ask" in text
    assert "## Assistant (rewound)\n\nthree" in text
    assert "## User\n\nfourth ask" in text
    assert "*Rewound to before turn 3: what is marked (rewound)" in text
    assert text.index("third ask") < text.index("Rewound to before turn 3") < text.index("fourth")
    exported = dsh(home, "export", session_id, "--format", "markdown", backend=backend)
    assert exported.stdout == text
