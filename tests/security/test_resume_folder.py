"""A resumed session works where it is resumed, not where its log says.

A session log is a file anyone can write, and ``dsh sessions import`` stores it: its
header's ``cwd`` is text. The attack, through the real binary: a log whose header
names another folder (``elsewhere/``) is imported, then resumed from the project in
accept-edits mode (writes in the working directory allowed unasked) while the scripted
model writes ``x.txt``. The file must land in the project, never in ``elsewhere/``,
and dsh must say that the session was made in another folder. ``--cwd`` still chooses
another folder when the person asks for it, and forking does the same as resuming.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dsh.llm import new_session_id
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh

WRITE = Reply(
    tool_calls=[
        ToolCallSpec(name="write", arguments={"file_path": "x.txt", "content": "written\n"})
    ]
)


async def imported_from_elsewhere(dsh: Dsh, fake_llm: FakeLLM) -> tuple[str, Path]:
    """A session made in the project, exported, given a new id and a header naming
    ``elsewhere/``, and imported: the id, and that folder."""
    elsewhere = dsh.root / "elsewhere"
    elsewhere.mkdir()
    fake_llm.add(Reply(text="Hello."))
    made = await dsh.run("-p", "hello")
    assert made.code == 0, made.stderr
    [original] = await dsh.session_ids()
    export = dsh.root / "session.jsonl"
    done = await dsh.run("sessions", "export", original, "-o", str(export))
    assert done.code == 0, done.stderr
    lines = export.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["cwd"] == str(dsh.project.resolve()), header
    header.update(id=new_session_id(), cwd=str(elsewhere))
    export.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    done = await dsh.run("sessions", "import", str(export))
    assert done.code == 0, done.stderr
    return str(header["id"]), elsewhere


@pytest.mark.parametrize("how", [["--resume"], ["--fork-session", "--resume"]])
async def test_an_imported_session_writes_where_it_is_resumed(
    dsh: Dsh, fake_llm: FakeLLM, how: list[str]
) -> None:
    session_id, elsewhere = await imported_from_elsewhere(dsh, fake_llm)
    fake_llm.add(WRITE, Reply(text="Written."))

    done = await dsh.run(
        "-p", "write the file", "--permission-mode", "accept-edits", *how, session_id
    )

    assert done.code == 0, done.stderr
    assert not (elsewhere / "x.txt").exists(), "the header's folder decided where dsh works"
    assert (dsh.project / "x.txt").read_text() == "written\n"
    assert f"made in {elsewhere}" in done.stderr, done.stderr
    assert f"working in {dsh.project.resolve()}" in done.stderr, done.stderr


async def test_cwd_chooses_the_folder_when_the_person_asks(dsh: Dsh, fake_llm: FakeLLM) -> None:
    session_id, elsewhere = await imported_from_elsewhere(dsh, fake_llm)
    fake_llm.add(WRITE, Reply(text="Written."))

    done = await dsh.run(
        "-p",
        "write the file",
        "--permission-mode",
        "accept-edits",
        "--cwd",
        str(elsewhere),
        "--resume",
        session_id,
    )

    assert done.code == 0, done.stderr
    assert (elsewhere / "x.txt").read_text() == "written\n"
    assert not (dsh.project / "x.txt").exists()
    assert "made in" not in done.stderr, done.stderr  # the folder it was made in: no notice


async def test_a_session_resumed_where_it_was_made_says_nothing(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Hello."))
    assert (await dsh.run("-p", "hello")).code == 0
    fake_llm.add(WRITE, Reply(text="Written."))

    done = await dsh.run("-p", "write it", "--permission-mode", "accept-edits", "--continue")

    assert done.code == 0, done.stderr
    assert (dsh.project / "x.txt").read_text() == "written\n"
    assert "made in" not in done.stderr, done.stderr


async def test_an_editor_loading_an_imported_session_works_in_its_own_folder(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """``session/load`` names the folder the editor has open: that one, not the log's."""
    from tests.acp.client import Editor, editor_session, text

    session_id, elsewhere = await imported_from_elsewhere(dsh, fake_llm)
    fake_llm.add(WRITE, Reply(text="Written."))
    editor = Editor(answers=["allow-once"])
    async with editor_session(dsh, editor) as (conn, _):
        await asyncio.wait_for(
            conn.load_session(cwd=str(dsh.project), session_id=session_id), TIMEOUT
        )
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session_id, prompt=text("write")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
    assert not (elsewhere / "x.txt").exists(), "the header's folder decided where dsh works"
    assert (dsh.project / "x.txt").read_text() == "written\n"
    moved = [e.data for e in await dsh.events(session_id) if e.type == "session/moved"]
    assert [(m.stored, m.cwd) for m in moved] == [(str(elsewhere), str(dsh.project.resolve()))]
