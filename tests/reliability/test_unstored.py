"""Nothing reported that is not stored: a session whose log cannot be written.

Each run caps the size of the files dsh may write (``RLIMIT_FSIZE``: see
tests/support/file_limit.py), so every write of its log fails as on a full disk
("File too large" where a full disk says "No space left on device"), with or without
root; tests/reliability/test_full_disk.py fills a real filesystem.

- A run none of whose session could be stored fails in every output format: exit 1,
  one ``dsh:`` line saying nothing was stored, a result record with ``subtype``
  ``error`` and no ``sessionId`` (the id names no stored session), no event printed
  in stream-json (none is stored), and no session left behind.
- Writes that fail for a while and then succeed (the disk freed) lose nothing: the
  writer keeps what failed and stores it once it can; the run ends as if nothing had
  happened, and stream-json prints every event, each once it is stored.
- Plain mode, the TUI (in tmux) and an editor over ``dsh acp`` say that writes fail
  while the turn still runs (a read-only ``gate`` call holds it: see
  tests/support/gate_tool.py), not at its end; the turn then fails, plain mode and
  the TUI exit with 1 and the reason, and the editor's prompt gets an error.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from acp import RequestError

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh, finish
from tests.reliability.runs import dicts
from tests.support.file_limit import lift, wrapper
from tests.support.tmux import TMUX, Terminal, child_env, says

# The title plugin would name an editor's session with a model call of its own.
SETTINGS = (
    '[plugins]\nmodules = ["tests.support.echo_tool", "tests.support.gate_tool"]\n'
    'disabled = ["title"]\n'
)
NOTHING_STORED = (
    "the session log cannot be written (File too large), so dsh stopped; nothing of this "
    "session was stored"
)


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    (dsh.home / "settings.toml").write_text(SETTINGS)
    dsh.wrapper = wrapper(0)  # no file dsh writes may hold a byte
    return dsh


SANDBOX_NOTICE = "⚠ dsh: the sandbox cannot start"
"""Said first under the file-size cap: Python's temp folder check writes a file, so the
sandbox's private temp folder cannot be made there."""


def without_sandbox_warning(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("dsh: the sandbox cannot start")]


def gate(path: Path) -> ToolCallSpec:
    return ToolCallSpec(name="gate", arguments={"path": str(path)})


@pytest.mark.parametrize("output", ["text", "json", "stream-json"])
async def test_a_run_none_of_whose_session_was_stored_fails_and_names_no_session(
    dsh: Dsh, fake_llm: FakeLLM, output: str
) -> None:
    fake_llm.add(Reply(text="Hello there."))
    done = await dsh.run("-p", "hi", "--output-format", output)

    assert done.code == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("dsh: ")]
    assert without_sandbox_warning(said) == [f"dsh: {NOTHING_STORED}"], done.stderr
    assert await dsh.session_ids() == []
    if output == "text":
        assert done.stdout == "Hello there.\n"  # what the person watched stream in
        return
    [result] = done.json_lines()  # stream-json: not one event was stored, so none printed
    assert result["type"] == "result"
    assert (result["subtype"], result["isError"]) == ("error", True)
    assert result["error"] == NOTHING_STORED
    assert result["sessionId"] is None
    assert result["result"] == "Hello there."


async def test_writes_that_fail_for_a_while_lose_nothing_once_they_succeed_again(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    opened = tmp_path / "gate"
    fake_llm.add(Reply(tool_calls=[gate(opened)]), Reply(text="Done."))
    child = await dsh.start("-p", "wait at the gate", "--output-format", "stream-json")
    assert child.stderr is not None
    # The first write (before the model's request) fails; the turn goes on to the
    # read-only gate call, which holds it while the disk is "freed".
    errors: list[bytes] = []
    while not any(b"write failed" in line for line in errors):
        line = await asyncio.wait_for(child.stderr.readline(), TIMEOUT)
        assert line, f"dsh ended before a write failed: {b''.join(errors)!r}"
        errors.append(line)
    lift(child.pid)
    opened.touch()
    done = await finish(child, b"")

    assert done.code == 0, b"".join(errors).decode() + done.stderr
    *printed, result = done.json_lines()
    assert (result["subtype"], result["sessionId"]) == ("success", printed[0]["sessionId"])
    events = await dsh.checked_events(printed[0]["sessionId"])
    # Every event was printed, once it was stored: the ones whose first write failed too.
    assert [{k: v for k, v in p.items() if k != "sessionId"} for p in printed] == dicts(events)
    assert events[-1].type == "turn/end"
    assert events[-1].data.reason.kind == "completed"


async def test_plain_mode_says_at_once_that_writes_fail_and_exits_with_1(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    opened = tmp_path / "gate"
    fake_llm.add(Reply(tool_calls=[gate(opened)]), Reply(text="Done."))
    child = await dsh.start("--plain")  # a script on stdin
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(b"wait at the gate\n")
    await child.stdin.drain()
    # Said while the turn still waits at the gate, not when it ends.
    shown = b""
    while b"cannot be written" not in shown:
        line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)
        assert line, f"plain mode ended without saying so: {shown!r}"
        shown += line
    assert not opened.exists()
    assert shown.decode().splitlines()[-1] == (
        "The session log cannot be written (File too large): what happens now is not "
        "saved. dsh keeps trying, and stops the turn before anything with effects."
    )
    opened.touch()
    child.stdin.close()
    done = await finish(child, None)

    assert done.code == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"turn 1 · failed: {NOTHING_STORED}" in lines[-2]
    assert lines[-1] == f"dsh: {NOTHING_STORED}"
    assert await dsh.session_ids() == []


async def test_an_editors_prompt_whose_session_cannot_be_stored_fails(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    opened = tmp_path / "gate"
    fake_llm.add(Reply(tool_calls=[gate(opened)]), Reply(text="Done."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        prompt = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=text("wait at the gate"))
        )
        # Said in the answer while the turn still waits at the gate, not when it ends.
        await editor.wait_for(lambda: "cannot be written" in editor.text())
        assert not prompt.done()
        opened.touch()
        with pytest.raises(RequestError) as failed:
            await asyncio.wait_for(prompt, TIMEOUT)
    assert str(failed.value) == NOTHING_STORED
    assert failed.value.data == {"code": "SESSION_WRITE_FAILED"}
    shown = editor.text()
    if shown.startswith(SANDBOX_NOTICE):
        shown = shown.split("\n\n", 1)[1]
    assert shown.startswith(
        "The session log cannot be written (File too large): what happens now is not saved."
    )
    assert await dsh.session_ids() == []


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
async def test_the_tui_shows_at_once_that_writes_fail_and_exits_with_1(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    opened = tmp_path / "gate"
    fake_llm.add(Reply(tool_calls=[gate(opened)]), Reply(text="Done."))
    terminal = Terminal(tmp_path)
    try:
        command = ["env", "TERM=xterm-256color", *dsh.wrapper, sys.executable, "-m", "dsh"]
        await terminal.start(command, dsh.project, child_env(dsh.home, fake_llm), record=True)
        await terminal.wait_for(says("/help lists commands"))
        await terminal.keys("wait at the gate", literal=True)
        await terminal.keys("Enter")
        # On screen while the turn still waits at the gate, not when it ends.
        screen = await terminal.wait_for(says("The session log cannot be written (File too"))
        assert not opened.exists()
        assert "⚠ not saved" in screen.strip().splitlines()[-1]  # the status line
        opened.touch()
        await terminal.wait_for(says("turn 1 · failed: the session log cannot be written"))
        await terminal.keys("C-q")
        assert await terminal.wait_exit() == "1"
        after = terminal.raw().rpartition(b"\x1b[?1049l")[2].decode(errors="replace")
    finally:
        await terminal.close()
    assert f"dsh: {NOTHING_STORED}" in after
    assert "Resume this session" not in after  # there is no session to resume
    assert await dsh.session_ids() == []


async def test_plain_mode_says_what_is_true_after_storage_caught_up(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A turn stopped by a failing write, then the disk freed: everything is stored in
    the end, and the last line says so (not "free the space"); the exit is still 1,
    since the turn stopped."""
    opened = tmp_path / "gate"
    fake_llm.add(Reply(tool_calls=[gate(opened)]), Reply(text="Done."))
    child = await dsh.start("--plain")
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(b"wait at the gate\n")
    await child.stdin.drain()

    async def read_until(wanted: bytes) -> bytes:
        shown = b""
        while wanted not in shown:
            line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)  # type: ignore[union-attr]
            assert line, f"plain mode ended before {wanted!r}: {shown!r}"
            shown += line
        return shown

    await read_until(b"cannot be written")
    opened.touch()
    await read_until(b"turn 1 \xc2\xb7 failed")
    lift(child.pid)  # the disk freed: the writer's own retry stores what it kept
    await read_until(b"written again: nothing was lost")
    child.stdin.close()
    done = await finish(child, None)

    assert done.code == 1, done.stdout + done.stderr
    [session_id] = await dsh.session_ids()
    assert done.stdout.splitlines()[-1] == (
        "dsh: turn 1 stopped because the session log could not be written then; all of "
        f"it is stored now: resume the session {session_id}"
    )
    events = await dsh.checked_events(session_id)
    assert events[-1].type == "turn/end"
