"""What the model, a tool or a stored session prints cannot drive the user's terminal.

Every surface is driven with the same hostile text (a clipboard write, a window
title, a hyperlink, a screen clear, the alternate screen, a bare ESC, 8-bit C1
controls), on a real terminal where the surface is one (tmux records every byte dsh
writes to it), and the test asserts that none of it arrived raw: only its visible
pictures (``␛]52;…``) did. ``dsh -p`` into a pipe is the exception, and stays
byte-exact.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.control_chars import visible
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh
from tests.support.tmux import TMUX, Terminal, child_env

# Each sequence is followed by a marker, so that a raw one shows up in the recording
# as ESC directly followed by its own text, whatever the UI draws around it.
HOSTILE = (
    "Q0\x1b]52;c;cHduZWQ=\x07Q1"  # OSC 52: write the clipboard
    "\x1b]0;PWNED-TITLE\x07Q2"  # OSC 0: the window title
    "\x1b]8;;https://evil.example/\x1b\\Q3\x1b]8;;\x1b\\Q4"  # OSC 8: a hyperlink
    "\x1b[2JQ5"  # clear the screen
    "\x1b[?1049hQ6"  # the alternate screen
    "\x1bZQ7"  # a bare ESC (DECID: the terminal answers on stdin)
    "\x9b2JQ8\x9d0;C1-TITLE\x9cQ9"  # C1: CSI and OSC without an ESC
)
SHOWN = visible(HOSTILE)
# What a raw sequence of HOSTILE looks like in what the terminal received.
RAW = re.compile(
    r"\x1b(?:\]52;|\]0;PWNED|\]8;;https://evil|\[2JQ5|\[\?1049hQ6|ZQ7)|[\x80-\x9f]|PWNED-TITLE\x07"
)
SGR = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def raw_hits(recorded: bytes) -> list[str]:
    text = recorded.decode("utf-8", errors="replace")
    return [match.group() for match in RAW.finditer(text)]


def assert_nothing_raw(recorded: bytes, *, only_colours: bool = True) -> None:
    """No hostile sequence arrived raw; with ``only_colours``, no escape at all but
    colour changes (a line-mode surface writes nothing else)."""
    assert recorded, "nothing was recorded"
    assert raw_hits(recorded) == []
    if only_colours:
        text = SGR.sub("", recorded.decode("utf-8", errors="replace"))
        assert "\x1b" not in text, repr(text[max(0, text.find("\x1b") - 40) :][:120])


@pytest.fixture
async def terminal(tmp_path: Path) -> AsyncIterator[Terminal]:
    (tmp_path / "tty").mkdir()
    term = Terminal(tmp_path / "tty", width=160, height=45)
    try:
        yield term
    finally:
        await term.close()


def hostile_turn(server: FakeLLM, *, command: str, title: bool = False) -> None:
    """One turn with hostile text everywhere: reasoning, a command that prints it, a
    read of a file named with it, the answer, and (``title``) the session's title."""
    server.add(
        Reply(
            reasoning=f"thinking {HOSTILE}",
            tool_calls=[
                ToolCallSpec(name="bash", arguments={"command": command, "description": "Print"}),
                ToolCallSpec(name="read", arguments={"file_path": f"missing-{HOSTILE}.txt"}),
            ],
        )
    )
    server.add(Reply(text=f"The answer: {HOSTILE} done."))
    if title:
        server.add(Reply(text=f"Title {HOSTILE}"))


PRINT = f"printf '%s\\n' 'out:{HOSTILE}'"


def live_turn(dsh: Dsh) -> None:
    """A turn that asks first: the approval dialog shows the hostile command."""
    tee = {"command": f"{PRINT} | tee x", "description": "Tee"}
    dsh.server.add(Reply(tool_calls=[ToolCallSpec(name="bash", arguments=tee)]))
    dsh.server.add(Reply(text=f"Live: {HOSTILE} end."))


async def stored_session(dsh: Dsh) -> str:
    """A session made by ``dsh -p`` into pipes, hostile everywhere: its stdout is the
    model's text byte for byte; its stderr notes show the escapes as pictures."""
    hostile_turn(dsh.server, command=PRINT, title=True)
    done = await dsh.run("-p", f"prompt {HOSTILE}", "--title", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr
    assert f"The answer: {HOSTILE} done." in done.stdout  # into a pipe: exact
    assert raw_hits(done.stderr.encode()) == []
    assert "\x1b" not in done.stderr
    # The failed read's note quotes the path (normalised: "https:/evil…").
    assert f"{SHOWN.split('Q4')[1]}.txt does not exist" in done.stderr
    [session_id] = await dsh.session_ids()
    return session_id


def tty_env(dsh: Dsh) -> dict[str, str]:
    env = child_env(dsh.home, dsh.server)
    env.update(TERM="xterm-256color", DSH_PLUGINS__TITLE__GENERATE="true")
    return env


def dsh_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsh", *args]


async def test_headless_on_a_terminal_and_stored_sessions_shown(
    dsh: Dsh, terminal: Terminal
) -> None:
    session_id = await stored_session(dsh)

    # dsh -p with stdout a terminal: the answer and every note as pictures.
    hostile_turn(dsh.server, command=PRINT)
    command = dsh_command("-p", "again", "--resume", session_id, "--permission-mode", "bypass")
    await terminal.start(command, dsh.project, tty_env(dsh), record=True)
    assert await terminal.wait_exit() == "0"
    assert_nothing_raw(terminal.raw())
    screen = await terminal.screen()
    assert "The answer: Q0␛]52;c;cHduZWQ=␇Q1␛]0;PWNED-TITLE␇Q2" in screen
    assert "missing-Q0␛]52" in screen

    # dsh sessions show, on a terminal; the Markdown export, into a file.
    await terminal.close()
    terminal.recording.unlink()
    terminal.status_file.unlink()
    await terminal.start(
        dsh_command("sessions", "show", session_id), dsh.project, tty_env(dsh), record=True
    )
    assert await terminal.wait_exit() == "0"
    assert_nothing_raw(terminal.raw())
    exported = dsh.root / "session.md"
    done = await dsh.run(
        "sessions", "export", session_id, "--format", "markdown", "--output", str(exported)
    )
    assert done.code == 0, done.stderr
    markdown = exported.read_text()
    assert raw_hits(markdown.encode()) == []
    assert "\x1b" not in markdown
    assert f"prompt {SHOWN}" in markdown
    assert f"The answer: {SHOWN} done." in markdown
    assert f"out:{SHOWN}" in markdown  # the command's output
    # The log and its JSONL export escape what JSON would leave raw: safe to `cat`.
    [log] = dsh.home.glob(f"sessions/*/{session_id}/session.jsonl")
    done = await dsh.run("sessions", "export", session_id)
    for jsonl in (log.read_text(), done.stdout):
        assert "Q0\\u001b]52;c;" in jsonl
        assert raw_hits(jsonl.encode()) == []
        assert "\x1b" not in jsonl


async def test_the_tui_live_and_resumed(dsh: Dsh, terminal: Terminal) -> None:
    session_id = await stored_session(dsh)
    live_turn(dsh)
    command = dsh_command("--resume", session_id)
    await terminal.start(command, dsh.project, tty_env(dsh), record=True)
    screen = await terminal.wait_for("The answer: Q0␛]52;c;cHduZWQ=␇Q1")  # the stored answer
    assert "out:Q0␛]52" in screen  # the stored command's output, on its card
    await terminal.keys("go on", literal=True)
    await terminal.wait_for(lambda text: "│ go on" in text)
    await terminal.keys("Enter")
    dialog = await terminal.wait_for("Allow once")
    assert "Q0␛]52;c;cHduZWQ=␇Q1" in dialog
    await terminal.press_until("y", "Allow once")
    screen = await terminal.wait_for("Live: Q0␛]52;c;cHduZWQ=␇Q1")
    assert "␛[2JQ5␛[?1049hQ6␛ZQ7␛[2JQ8␛]0;C1-TITLE␛\\Q9" in screen
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"

    recorded = terminal.raw()
    assert_nothing_raw(recorded, only_colours=False)
    # The terminal's title, set from the session's: shown, not obeyed.
    titles = re.findall(rb"\x1b\]2;([^\x07]*)\x07", recorded)
    assert titles, "the session's title never reached the terminal's"
    assert any("Title Q0␛]52" in title.decode() for title in titles)


async def test_plain_mode_live_and_resumed(dsh: Dsh, terminal: Terminal) -> None:
    session_id = await stored_session(dsh)
    live_turn(dsh)
    command = dsh_command("--plain", "--resume", session_id)
    await terminal.start(command, dsh.project, tty_env(dsh), record=True)
    await terminal.wait_for("The answer: Q0␛]52;c;cHduZWQ=␇Q1")
    await terminal.keys("go on", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for("Allow?")
    await terminal.keys("y", "Enter")
    await terminal.wait_for("Live: Q0␛]52;c;cHduZWQ=␇Q1")
    await terminal.keys("/quit", "Enter")
    assert await terminal.wait_exit() == "0"
    assert_nothing_raw(terminal.raw(), only_colours=False)
    text = SGR.sub("", terminal.raw().decode("utf-8", errors="replace"))
    # prompt-toolkit moves the cursor with its own escapes; between the markers of
    # what dsh printed there are none.
    shown = [
        line[line.index("Q0") : line.rindex("Q9")]
        for line in text.splitlines()
        if "Q0" in line and "Q9" in line
    ]
    assert len(shown) >= 5  # the prompt, the command (twice), its output, the answer
    for piece in shown:
        assert "\x1b" not in piece, repr(piece)


def test_json_lines_escape_what_a_terminal_obeys() -> None:
    from dsh.wire import dumps

    value = {"text": HOSTILE + "\u202e\u2028"}
    line = dumps(value)
    assert json.loads(line) == value
    assert raw_hits(line.encode()) == []
    assert "\x1b" not in line
