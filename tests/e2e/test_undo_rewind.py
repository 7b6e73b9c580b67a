"""Issue 38's "Done when", through the real ``dsh`` against the scripted server.

One turn changes six files five ways: ``write`` overwrites one, ``edit`` edits
another, ``bash rm`` deletes a third, a ``bash`` redirection creates a fourth, a
terminal changes a fifth, and ``bash`` changes a sixth that the person then edits by
hand. ``dsh -p "/undo" --resume ID`` restores the five exactly (bytes and modes) and
reports the sixth as a conflict, left as the person made it. ``/rewind 1`` restores
code and conversation: the next request holds only the first prompt. The same after a
``/compact``, and with dsh killed (SIGKILL) in the middle of the restore, on both
storage backends: the files are always all before or all after, and the next
resume finishes the restore.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from dsh.session import check_log
from dsh.settings_tables import Backend
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh, of_type, user_texts
from tests.plugins.compaction.support import MODULES, WINDOW

BACKENDS: list[Backend] = ["jsonl", "sqlite"]
FIRST_PROMPT = "make the six changes"

BEFORE: dict[str, tuple[bytes, int]] = {
    "written.txt": (b"written before\n", 0o644),
    "edited.sh": (b"#!/bin/sh\necho old\n", 0o755),
    "removed.bin": (bytes(range(256)) + b"\r\n\x00end", 0o600),
    "terminal.txt": (b"typed before\n", 0o640),
    "hand.txt": (b"hand before\n", 0o644),
}
"""The project before the turn: name -> (bytes, mode). ``created.txt`` does not exist."""


def configure(dsh: Dsh, backend: Backend, *, compaction: bool = False) -> None:
    """``dsh``'s settings, its sessions stored with ``backend``."""
    dsh.backend = backend
    (dsh.home / "settings.toml").write_text(settings(backend, compaction=compaction))


def settings(backend: str, *, compaction: bool = False) -> str:
    modules = MODULES if compaction else ["tests.support.echo_tool"]
    text = f'[plugins]\nmodules = {json.dumps(modules)}\n\n[storage]\nbackend = "{backend}"\n'
    if compaction:
        text += (
            "\n[plugins.llm-deepseek.retry]\nmax_retries = 0\n"
            f"\n[plugins.llm-deepseek.models.deepseek-flash]\ncontext_window = {WINDOW}\n"
        )
    return text


def call(tool: str, **arguments: Any) -> ToolCallSpec:
    return ToolCallSpec(name=tool, arguments=arguments)


def bash(command: str) -> ToolCallSpec:
    return call("bash", command=command, description="change the project")


def plant(project: Path) -> None:
    for name, (data, mode) in BEFORE.items():
        path = project / name
        path.write_bytes(data)
        path.chmod(mode)


def state(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the project: name -> (bytes, permission bits)."""
    found = {}
    for path in sorted(project.rglob("*")):
        if path.is_file() and ".git" not in path.parts:
            found[str(path.relative_to(project))] = (
                path.read_bytes(),
                stat.S_IMODE(path.stat().st_mode),
            )
    return found


def the_turn() -> list[Reply]:
    """The model's replies for the turn that changes the six files."""
    return [
        Reply(
            tool_calls=[call("read", file_path="written.txt"), call("read", file_path="edited.sh")]
        ),
        Reply(
            tool_calls=[
                call("write", file_path="written.txt", content="written by the turn\n"),
                call("edit", file_path="edited.sh", old_string="echo old", new_string="echo new"),
            ]
        ),
        Reply(tool_calls=[bash("rm removed.bin")]),
        Reply(tool_calls=[bash("printf 'made by a redirection\\n' > created.txt")]),
        Reply(
            tool_calls=[
                call(
                    "terminal_open",
                    command="printf 'typed in a terminal\\n' > terminal.txt; chmod 600 terminal.txt",
                    name="changer",
                )
            ]
        ),
        Reply(tool_calls=[call("terminal_read", terminal_id="t1", wait="exit")]),
        Reply(tool_calls=[bash("printf 'agent wrote this\\n' > hand.txt")]),
        Reply(text="Made the six changes."),
    ]


async def first_turn(dsh: Dsh, fake_llm: FakeLLM, backend: Backend) -> str:
    configure(dsh, backend)
    plant(dsh.project)
    fake_llm.add(*the_turn())
    done = await dsh.run("-p", FIRST_PROMPT, "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    [session_id] = await dsh.session_ids()
    after = state(dsh.project)
    assert after["written.txt"][0] == b"written by the turn\n"
    assert after["edited.sh"][0] == b"#!/bin/sh\necho new\n"
    assert "removed.bin" not in after
    assert after["created.txt"][0] == b"made by a redirection\n"
    assert after["terminal.txt"] == (b"typed in a terminal\n", 0o600)
    assert after["hand.txt"][0] == b"agent wrote this\n"
    return session_id


@pytest.mark.parametrize("backend", BACKENDS)
async def test_undo_restores_five_changes_and_leaves_a_hand_edit_alone(
    dsh: Dsh, fake_llm: FakeLLM, backend: Backend
) -> None:
    session_id = await first_turn(dsh, fake_llm, backend)
    (dsh.project / "hand.txt").write_bytes(b"the person's own edit\n")
    asked = len(fake_llm.chat_requests)

    dry = await dsh.run("-p", "/undo --dry-run", "--resume", session_id)
    assert dry.code == 0, dry.stderr[-3000:]
    assert "hand.txt" in dry.stdout
    assert (dsh.project / "created.txt").exists()  # shown, not done

    done = await dsh.run("-p", "/undo", "--resume", session_id, "--output-format", "json")
    assert done.code == 0, done.stderr[-3000:]
    [result] = done.json_lines()
    assert result["type"] == "result"
    assert result["subtype"] == "undo"
    assert result["isError"] is False
    assert sorted(result["restored"]) == sorted(
        ["written.txt", "edited.sh", "removed.bin", "created.txt", "terminal.txt"]
    )
    assert result["conflicts"] == ["hand.txt"]
    assert result["sessionId"] == session_id
    restored = state(dsh.project)
    assert restored.pop("hand.txt") == (b"the person's own edit\n", 0o644)
    assert restored == {name: BEFORE[name] for name in BEFORE if name != "hand.txt"}
    assert len(fake_llm.chat_requests) == asked  # nobody asked the model

    # Nothing left to undo: exit 1 with the reason.
    again = await dsh.run("-p", "/undo", "--resume", session_id, "--output-format", "json")
    assert again.code == 1
    [failed] = again.json_lines()
    assert failed["isError"] is True
    assert failed["error"]


async def two_turns(
    dsh: Dsh, fake_llm: FakeLLM, backend: Backend, *, files: int = 3, known: set[str] | None = None
) -> str:
    """A new session: turn 1 creates ``one.txt``; turn 2 changes it and creates
    ``files`` more in ``many/``. ``known``: the sessions there were before."""
    fake_llm.add(
        Reply(tool_calls=[bash("printf 'one\\n' > one.txt")]),
        Reply(text="Wrote one."),
    )
    done = await dsh.run("-p", FIRST_PROMPT, "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    [session_id] = set(await dsh.session_ids()) - (known or set())
    fake_llm.add(
        Reply(
            tool_calls=[
                bash(
                    "printf 'one, changed\\n' > one.txt; mkdir -p many; "
                    f'for i in $(seq 1 {files}); do printf "file $i\\n" > many/$i.txt; done'
                )
            ]
        ),
        Reply(text="Changed one and made many."),
    )
    done = await dsh.run(
        "-p", "the second prompt", "--resume", session_id, "--permission-mode", "bypass"
    )
    assert done.code == 0, done.stderr[-3000:]
    return session_id


async def rewind_to_the_first_turn(
    dsh: Dsh, fake_llm: FakeLLM, session_id: str, *, rebuilt: bool = True
) -> None:
    done = await dsh.run("-p", "/rewind 1", "--resume", session_id, "--output-format", "json")
    assert done.code == 0, done.stderr[-3000:]
    [result] = done.json_lines()
    assert result["subtype"] == "rewind"
    assert result["prompt"] == FIRST_PROMPT
    assert "one.txt" in result["restored"]
    assert result["conflicts"] == []
    await the_next_request_holds_only_the_first_prompt(dsh, fake_llm, session_id, rebuilt=rebuilt)


async def the_next_request_holds_only_the_first_prompt(
    dsh: Dsh, fake_llm: FakeLLM, session_id: str, *, rebuilt: bool = True
) -> None:
    """Sent again, the first prompt goes out alone. ``rebuilt``: every request the
    server received was this session's, and can be rebuilt from its log (not with a
    compaction's summary request among them, nor with other sessions')."""
    assert state(dsh.project) == BEFORE_REWIND
    fake_llm.add(Reply(text="Starting again."))
    done = await dsh.run("-p", FIRST_PROMPT, "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]
    texts = user_texts(fake_llm.chat_requests[-1].body)
    assert texts[-1] == FIRST_PROMPT
    assert not any("second prompt" in text for text in texts)
    assert sum(FIRST_PROMPT in text for text in texts) == 1
    assert not any(
        "Wrote one." in json.dumps(m) for m in fake_llm.chat_requests[-1].body["messages"]
    )
    events = await (dsh.checked_events if rebuilt else dsh.events)(session_id)
    assert check_log(events) == []
    assert len(of_type(events, "history/rewound")) == 1


BEFORE_REWIND = {"kept.txt": (b"kept\n", 0o644)}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_rewind_to_the_first_turn_restores_code_and_conversation(
    dsh: Dsh, fake_llm: FakeLLM, backend: Backend
) -> None:
    configure(dsh, backend)
    (dsh.project / "kept.txt").write_bytes(b"kept\n")
    session_id = await two_turns(dsh, fake_llm, backend)
    # Nobody to ask: the command line must name the turn, and one that is there.
    unnamed = await dsh.run("-p", "/rewind", "--resume", session_id)
    assert unnamed.code == 1
    assert "name the turn to rewind to: /rewind N (turns 1-2)" in unnamed.stderr
    missing = await dsh.run("-p", "/rewind 9", "--resume", session_id, "--output-format", "json")
    assert missing.code == 1
    [refused] = missing.json_lines()
    assert refused["isError"] is True
    assert "there is no turn 9" in refused["error"]
    assert (dsh.project / "one.txt").exists()
    await rewind_to_the_first_turn(dsh, fake_llm, session_id)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_rewind_after_a_compaction(dsh: Dsh, fake_llm: FakeLLM, backend: Backend) -> None:
    configure(dsh, backend, compaction=True)
    (dsh.project / "kept.txt").write_bytes(b"kept\n")
    session_id = await two_turns(dsh, fake_llm, backend)
    fake_llm.add(Reply(text="Summary: one.txt was written, then changed; many files made."))
    done = await dsh.run("-p", "/compact", "--resume", session_id)
    assert done.code == 0, done.stderr[-3000:]
    events = await dsh.events(session_id)
    assert of_type(events, "compaction/summary")
    await rewind_to_the_first_turn(dsh, fake_llm, session_id, rebuilt=False)


async def kill_when(child: asyncio.subprocess.Process, folder: Path, left: int) -> bool:
    """SIGKILL ``child`` once ``folder`` holds at most ``left`` files (the restore is
    removing them); False when it ended first."""
    while child.returncode is None:
        if sum(1 for _ in folder.glob("*.txt")) <= left:
            child.send_signal(signal.SIGKILL)
            await asyncio.wait_for(child.wait(), TIMEOUT)
            return True
        await asyncio.sleep(0.002)
    return False


@pytest.mark.parametrize("backend", BACKENDS)
async def test_sigkill_during_the_restore_and_a_resume_finishes_it(
    dsh: Dsh, fake_llm: FakeLLM, backend: Backend
) -> None:
    """A few kills at random points of the restore (``DSH_REWIND_KILLS`` for more):
    each time the restore is recorded before any file is touched, and the next
    process to resume the session finishes it, whatever was done already, and then
    rewinds the conversation that was to follow the files."""
    configure(dsh, backend)
    (dsh.project / "kept.txt").write_bytes(b"kept\n")
    rng = random.Random(38)
    files = 300
    landed = 0
    for _ in range(int(os.environ.get("DSH_REWIND_KILLS", "3"))):
        known = set(await dsh.session_ids())
        session_id = await two_turns(dsh, fake_llm, backend, files=files, known=known)
        after = state(dsh.project)
        assert len(after) == files + 2
        child = await dsh.start("-p", "/rewind 1", "--resume", session_id)
        await kill_when(child, dsh.project / "many", rng.randint(1, files - 1))
        events = await dsh.events(session_id)
        started = {e.data.restore_id for e in of_type(events, "checkpoint/restoring")}
        finished = {e.data.restore_id for e in of_type(events, "checkpoint/restored")}
        assert started, "a file was touched before the restore was recorded"
        # The kill may still come after the restore's end: then it is all done.
        interrupted = bool(started - finished)
        landed += interrupted
        if not interrupted:
            assert state(dsh.project) == BEFORE_REWIND
        # A new process resumes the session and finishes what was begun.
        done = await dsh.run("-p", "/cost", "--resume", session_id)
        assert done.code == 0, done.stderr[-3000:]
        assert state(dsh.project) == BEFORE_REWIND
        events = await dsh.events(session_id)
        assert check_log(events) == []
        done_ids = {e.data.restore_id for e in of_type(events, "checkpoint/restored")}
        assert started <= done_ids
        resumed = any(e.data.resumed for e in of_type(events, "checkpoint/restored"))
        assert resumed == interrupted
        [rewound] = of_type(events, "history/rewound")  # once, after the files
        assert rewound.data.turn == 1
        assert rewound.data.restore_id in started
    assert landed, "no kill landed inside the restore"
    await the_next_request_holds_only_the_first_prompt(dsh, fake_llm, session_id, rebuilt=False)
