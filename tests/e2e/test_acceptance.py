"""Acceptance scenarios: the real ``dsh`` in a real terminal (tmux), used the way a
person and terminal automation use it, judged by what the screen shows.

- keys typed while a reply streams stay in the prompt, whole and once, and go out
  with the next Enter; Esc stops a streaming reply, keeps what was typed, and the
  next turn works;
- the window resized while a reply streams: all of the answer is there afterwards;
- five text blocks between tool calls in one turn: every one stays on screen;
- ``dsh --demo`` from its first message to its last answer, leaving no folder behind.

Every wait polls the screen and is bounded (``TIMEOUT`` each); nothing here asserts
how long anything took (that is bench/'s business). The scripted replies stream
slowly enough that the keys and resizes land while they stream, and the tests check
that they did, from the screen.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, RecordedRequest, Reply, ToolCallSpec
from dsh.ui.tui.screens.guard import GUARD_SECONDS
from tests.support.tmux import TIMEOUT, TMUX, Terminal, child_env, says

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

DSH = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
OPENING = "/help lists commands and keys"  # the session is open
EMPTY_PROMPT = "Ask dsh anything"  # the empty prompt's placeholder


def environment(tmp_path: Path, server: FakeLLM) -> dict[str, str]:
    """A ``HOME`` and ``DSH_HOME`` of the test's own, and its scripted server."""
    user = tmp_path / "user"
    (user / ".dsh").mkdir(parents=True)
    env = child_env(user / ".dsh", server)
    env["HOME"] = str(user)
    return env


def project_dir(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


# --- reading the screen -----------------------------------------------------------------


def prompt_box(screen: str) -> list[str] | None:
    """The lines inside the prompt's box (the last ``╭…╮`` on the screen), borders
    and padding taken off; None when no box is on screen."""
    lines = screen.splitlines()
    tops = [i for i, line in enumerate(lines) if line.lstrip().startswith("╭")]
    if not tops:
        return None
    inside: list[str] = []
    for line in lines[tops[-1] + 1 :]:
        if line.lstrip().startswith("╰"):
            return inside
        inside.append(line.strip().removeprefix("│").removesuffix("│").strip())
    return None


def prompt_text(screen: str) -> str | None:
    """What is typed in the prompt ("" when it shows its placeholder)."""
    box = prompt_box(screen)
    if box is None:
        return None
    text = "\n".join(box).strip()
    return "" if text.startswith(EMPTY_PROMPT) else text


def box_width(screen: str) -> int:
    """How wide the prompt's box is drawn: the width dsh laid its screen out for (0
    before it drew one, or when the box on screen is one tmux cut to a narrower
    window: its corner is gone)."""
    tops = [line.rstrip() for line in screen.splitlines() if line.lstrip().startswith("╭")]
    return len(tops[-1]) if tops and tops[-1].endswith("╮") else 0


def status_line(screen: str) -> str:
    return [line for line in screen.splitlines() if line.strip()][-1]


def user_texts(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "user"]


async def transcript_screens(term: Terminal, *, top: str, bottom: str) -> list[str]:
    """The whole transcript, a screen at a time: Home (with the prompt empty) goes to
    its top, where ``top`` shows; PgDn pages down until ``bottom`` (its last entry)
    shows; End then puts it back to following the output."""
    screen = await term.screen()
    assert prompt_text(screen) == "", "Home scrolls the transcript only when nothing is typed"
    await term.keys("Home")
    screen = await term.wait_for(says(top))
    screens = [screen]
    while bottom not in screen:
        await term.keys("PageDown")
        screen = await settled(term, await term.wait_for(changed_from(screen)))
        screens.append(screen)
    await term.keys("End")
    return screens


async def settled(term: Terminal, screen: str) -> str:
    """The screen once a redraw is over: two captures alike. tmux may be captured
    while a frame is half written (a scrolled page's top rows over the old ones),
    which would show one entry twice."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        await asyncio.sleep(0.05)
        again = await term.screen()
        if again == screen or time.monotonic() > deadline:
            return again
        screen = again


def changed_from(before: str) -> Callable[[str], bool]:
    return lambda screen: screen != before


def lines_of(screens: Iterable[str]) -> list[str]:
    return [line.strip() for screen in screens for line in screen.splitlines()]


def shows_any(words: Iterable[str]) -> Callable[[str], bool]:
    wanted = list(words)
    return lambda screen: any(word in screen for word in wanted)


APPROVAL = "Allow once [y]"
QUESTION = "Enter: pick · Tab: your own answer"


async def answer_dialog(term: Terminal, shown: str, key: str) -> str:
    """Answer the dialog that shows ``shown`` with ``key``, as a person does: having
    seen it first. A dialog takes keys pressed within ``GUARD_SECONDS`` of the last one as
    meant for the prompt (by design), so the person's moment of reading is that long.
    The dialog's screen, as it was answered."""
    dialog = await term.wait_for(shown, limit=2 * TIMEOUT)
    await asyncio.sleep(GUARD_SECONDS)  # the pause of reading it
    await term.keys(key)
    await term.wait_for(lambda screen: shown not in screen)
    return dialog


def turn_ended(summary: str) -> Callable[[str], bool]:
    """The turn's closing line and the idle status line on one screen: Textual may
    draw them in different frames, so waiting for the first alone and asserting the
    second raced on a loaded machine."""
    return lambda text: summary in text and "idle" in status_line(text)


async def quit_dsh(term: Terminal) -> None:
    await term.keys("C-q")
    assert await term.wait_exit() == "0"


# --- keys while a reply streams ---------------------------------------------------------

WORDS = [f"w{i:03d}" for i in range(320)]
"""A long answer of numbered words: where the stream has got to shows on screen."""


def slow_words() -> Reply:
    """Some 400 tokens, a few characters at a time: several seconds on screen."""
    return Reply(text=" ".join(WORDS), chunk_size=4, chunk_delay_ms=25)


async def test_keys_typed_while_a_reply_streams_stay_in_the_prompt_and_go_out_with_enter(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """A person types the next message while the answer streams, a few keys at a
    time between bursts of output, and the last words pasted in one write as
    automation does: after the turn the prompt holds exactly what was typed (nothing
    lost, nothing doubled), and Enter sends exactly that."""
    fake_llm.add(slow_words())
    fake_llm.add(Reply(text="Checked them again."))
    await terminal.start(DSH, project_dir(tmp_path), environment(tmp_path, fake_llm))
    await terminal.wait_for(says(OPENING))
    await terminal.keys("count to three hundred", "Enter")

    # (once the answer has come this far, type this, one write per key or in one)
    pieces = [("w020", "please al", True), ("w060", "so check ", True), ("w100", "the tests", True)]
    pieces.append(("w140", " again", False))  # one write, as automation types
    typed = ""
    for after, piece, by_key in pieces:
        await terminal.wait_for(shows_any(WORDS[WORDS.index(after) :]))
        for keys in piece if by_key else [piece]:
            await terminal.keys(keys, literal=True)
        typed += piece
    screen = await terminal.wait_for(lambda text: prompt_text(text) == typed)
    assert "turn 1 ·" not in screen, "the keys were meant to land while the answer streamed"
    assert "answering" in status_line(screen)

    screen = await terminal.wait_for(turn_ended("turn 1 · completed"), limit=4 * TIMEOUT)
    assert WORDS[-1] in screen  # the answer streamed to its end
    assert prompt_text(screen) == typed

    await terminal.keys("Enter")
    screen = await terminal.wait_for("Checked them again.")
    assert prompt_text(screen) == ""
    assert len(fake_llm.chat_requests) == 2
    assert user_texts(fake_llm.chat_requests[1])[-1] == typed == "please also check the tests again"
    await quit_dsh(terminal)


async def test_esc_stops_a_streaming_reply_and_the_next_turn_works(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """Esc while the answer streams: the turn ends cancelled (dsh hangs up on the
    stream) and what was typed meanwhile stays in the prompt; Enter then sends it and
    the next turn gets its answer."""
    fake_llm.add(slow_words())
    fake_llm.add(Reply(text="Here is the short version."))
    await terminal.start(DSH, project_dir(tmp_path), environment(tmp_path, fake_llm))
    await terminal.wait_for(says(OPENING))
    await terminal.keys("count to three hundred", "Enter")
    await terminal.wait_for(shows_any(WORDS[20:]))
    for key in "shorter please":
        await terminal.keys(key, literal=True)
    await terminal.wait_for(lambda text: prompt_text(text) == "shorter please")
    await terminal.keys("Escape")

    screen = await terminal.wait_for(turn_ended("turn 1 · cancelled"))
    assert screen.count("turn 1 · cancelled") == 1
    assert WORDS[-1] not in screen  # it stopped before the end
    assert prompt_text(screen) == "shorter please"
    stopped = fake_llm.chat_requests[0]
    await asyncio.wait_for(stopped.done.wait(), TIMEOUT)
    assert stopped.disconnected_at is not None  # dsh hung up: the stream really stopped
    assert stopped.finished_at is None

    await terminal.keys("Enter")
    screen = await terminal.wait_for("turn 2 · completed")
    assert "Here is the short version." in screen
    assert prompt_text(screen) == ""
    assert len(fake_llm.chat_requests) == 2
    assert user_texts(fake_llm.chat_requests[1])[-1] == "shorter please"
    await quit_dsh(terminal)


# --- the window resized while a reply streams -------------------------------------------

ITEMS = [
    f"item {n:02d} " + " ".join(f"{n:02d}{c}" for c in "abcdefghijklmnopqrst") for n in range(1, 41)
]
"""Forty list items of 88 characters: one line each at 120 columns, two at 80."""


def item_reached(number: int) -> Callable[[str], bool]:
    return shows_any(f"item {n:02d} " for n in range(number, len(ITEMS) + 1))


async def test_the_whole_answer_is_there_after_the_window_is_resized_while_it_streams(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """120x40, then 80x30 while the answer streams, then 120x40 again: afterwards
    every line of the answer is on screen (paging through the transcript), each
    whole, and the prompt still takes a message."""
    answer = "Here is the list:\n\n" + "\n".join(f"- {item}" for item in ITEMS)
    fake_llm.add(Reply(text=answer, chunk_size=8, chunk_delay_ms=20))
    fake_llm.add(Reply(text="Still here, still listening."))
    term = Terminal(tmp_path, width=120, height=40)
    try:
        await term.start(DSH, project_dir(tmp_path), environment(tmp_path, fake_llm))
        await term.wait_for(says(OPENING))
        await term.keys("list forty items", "Enter")

        await term.wait_for(item_reached(8))
        await term.resize(80, 30)
        await term.wait_for(lambda text: box_width(text) == 80)  # laid out again, narrower
        await term.wait_for(item_reached(16))
        await term.resize(120, 40)
        screen = await term.wait_for(lambda text: box_width(text) == 120)
        assert "turn 1 ·" not in screen, "the resizes were meant to land mid-stream"

        await term.wait_for("turn 1 · completed", limit=4 * TIMEOUT)
        screens = await transcript_screens(term, top=OPENING, bottom="turn 1 · completed")
        seen = lines_of(screens)
        missing = [item for item in ITEMS if not any(line.endswith(item) for line in seen)]
        assert missing == [], f"not on screen whole: {missing}"
        assert any(line == "Here is the list:" for line in seen)

        await term.wait_for(item_reached(len(ITEMS)))  # End: back at the bottom
        await term.keys("still there?", "Enter")
        screen = await term.wait_for("Still here, still listening.")
        assert prompt_text(screen) == ""
        assert user_texts(fake_llm.chat_requests[1])[-1] == "still there?"
        await quit_dsh(term)
    finally:
        await term.close()


# --- five text blocks between tool calls ------------------------------------------------

MARKERS = ["kestrel", "marmoset", "quokka", "pangolin", "axolotl"]


async def test_five_text_blocks_between_tool_calls_all_stay_on_screen(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """One turn of five steps, each a text block and (but the last) a tool call:
    once the turn is over, every block's marker word is on screen, once per screen.
    Guards a past bug where finished text blocks vanished."""
    project = project_dir(tmp_path)
    for number in range(1, 5):
        (project / f"notes{number}.txt").write_text(f"note {number}\n")
    for number, marker in enumerate(MARKERS, start=1):
        text = f"Block {number} of five, marker {marker}: " + "some words to stream. " * 4
        calls = [ToolCallSpec(name="read", arguments={"file_path": f"notes{number}.txt"})]
        fake_llm.add(
            Reply(text=text.strip(), tool_calls=calls if number < 5 else [], chunk_delay_ms=10)
        )
    await terminal.start(DSH, project, environment(tmp_path, fake_llm))
    await terminal.wait_for(says(OPENING))
    await terminal.keys("read the four notes", "Enter")

    await terminal.wait_for("turn 1 · completed", limit=4 * TIMEOUT)
    assert len(fake_llm.chat_requests) == 5
    screens = await transcript_screens(terminal, top=OPENING, bottom="turn 1 · completed")
    for screen in screens:
        for marker in MARKERS:
            assert screen.count(marker) <= 1, f"{marker} twice on one screen:\n{screen}"
    seen = "\n".join(lines_of(screens))
    for number, marker in enumerate(MARKERS, start=1):
        assert f"Block {number} of five, marker {marker}:" in seen, f"block {number} is gone"
    # Back at the bottom the last block and the end of the turn are there.
    screen = await terminal.wait_for("turn 1 · completed")
    assert MARKERS[-1] in screen
    await quit_dsh(terminal)


# --- the demo ---------------------------------------------------------------------------


async def test_the_demo_runs_to_its_end_and_leaves_no_folder_behind(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """``dsh --demo``: Enter sends the message it puts in the prompt, two approvals
    and a question are answered, and its last answer ("Done. ...") is on screen;
    after quitting, the folder it made in the temporary directory is gone. (Its own
    ``TMPDIR``: a folder there is this demo's, whatever else runs on the machine.)"""
    temp = tmp_path / "temp"  # its TMPDIR: what it makes there is the demo's alone
    temp.mkdir()
    env = environment(tmp_path, fake_llm)  # the demo runs its own server, not this one
    env["TMPDIR"] = str(temp)
    await terminal.start([*DSH, "--demo"], tmp_path, env)

    await terminal.wait_for(
        lambda text: (prompt_text(text) or "").startswith("Have a look at greet.py"),
        limit=2 * TIMEOUT,  # a cold start
    )
    made = [path.name for path in temp.glob("dsh-demo-*")]
    assert len(made) == 1
    await terminal.wait_for(says(OPENING))
    await terminal.keys("Enter")
    dialog = await answer_dialog(terminal, APPROVAL, "y")
    assert "edit greet.py" in dialog
    assert 'Nice to see you."' in dialog  # the diff
    dialog = await answer_dialog(terminal, APPROVAL, "y")
    assert "bash runs a command: python3 greet.py" in dialog
    dialog = await answer_dialog(terminal, QUESTION, "Enter")  # the first option: Yes
    assert "Should I add a test for greet()?" in dialog

    screen = await terminal.wait_for(turn_ended("turn 1 · completed"), limit=2 * TIMEOUT)
    assert "Done. greet.py now says:" in screen
    assert 'return f"Hello, {name}! Nice to see you."' in screen
    assert "That was the whole demo" in screen
    assert prompt_text(screen) == ""  # no key meant for a dialog went astray
    await quit_dsh(terminal)
    assert sorted(temp.glob("dsh-demo-*")) == []
