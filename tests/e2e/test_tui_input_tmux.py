"""Keys reach the real ``dsh`` in a real terminal (tmux) with the meaning docs/keys.md
gives them and in the order typed: typed while dsh starts, in one burst, and the keys
a terminal sends as an escape sequence (Alt+Enter is ``ESC CR``).

What reached the scripted server and what the screen shows is asserted, never when.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply
from tests.support.tmux import TMUX, Terminal, child_env, says
from tests.support.waits import HANG_S

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

READY = "/help lists commands"
"""On screen once the session is open."""
EMPTY_PROMPT = "Ask dsh anything"


def sent(server: FakeLLM) -> list[str]:
    """The user messages of the conversation, as the last request carried them."""
    if not server.chat_requests:
        return []
    messages = server.chat_requests[-1].body["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    # (the environment plugin's context goes as a user message of its own)
    return [text for text in users if not text.startswith("Today's date: ")]


async def start(terminal: Terminal, tmp_path: Path, server: FakeLLM, *after: str) -> Path:
    """dsh in the terminal (then ``after``, a shell line, once it exits); the home."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    line = f"env TERM=xterm-256color {sys.executable} -m dsh"
    command = ["sh", "-c", "; ".join([line, *after])]
    await terminal.start(command, project, child_env(home, server))
    return home


async def wait_sent(server: FakeLLM, count: int) -> list[str]:
    """The user messages once ``count`` of them went out (a bounded poll)."""
    await _poll(lambda: len(sent(server)) >= count, f"{count} messages sent")
    return sent(server)


async def _poll(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("after_s", [0.0, 0.2, 0.5])
async def test_an_enter_typed_while_dsh_starts_sends(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal, after_s: float
) -> None:
    """Issue 36 item 1: 'x' Enter typed a moment after exec, while the terminal may
    still be in cooked mode (which turns CR into LF, read as Ctrl+J): it is sent,
    whichever side of dsh's switch to raw mode the bytes arrived on."""
    fake_llm.add(Reply(text="Answer one."))
    await start(terminal, tmp_path, fake_llm)
    await asyncio.sleep(after_s)  # the scenario: keys at this time after exec
    await terminal.keys("x", "Enter")
    assert await wait_sent(fake_llm, 1) == ["x"]
    screen = await terminal.wait_for("Answer one.")
    assert EMPTY_PROMPT in screen
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_keys_typed_while_starting_keep_their_order(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """Typing, a new line and Enter at once after exec arrive as typed."""
    fake_llm.add(Reply(text="Answer one."))
    fake_llm.add(Reply(text="Answer two."))
    await start(terminal, tmp_path, fake_llm)
    await terminal.keys("first", "M-Enter", "line", "Enter", "second", "Enter")
    assert await wait_sent(fake_llm, 2) == ["first\nline", "second"]
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_the_terminal_gets_its_mode_back(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """dsh takes the terminal into raw mode before Textual does; on the way out the
    shell gets the cooked mode back (echo, lines, CR read as Enter)."""
    modes = tmp_path / "stty.txt"
    await start(terminal, tmp_path, fake_llm, f"stty -a > {modes}")
    await terminal.wait_for(says(READY))
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"
    flags = modes.read_text().split()
    for flag in ("icrnl", "icanon", "echo", "isig", "iexten"):
        assert flag in flags, f"{flag} is off after dsh exited"


async def test_alt_enter_adds_a_line(tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal) -> None:
    """Issue 36 item 4: Alt+Enter (``ESC CR``) is a new line, as the README says."""
    fake_llm.add(Reply(text="Two lines."))
    await start(terminal, tmp_path, fake_llm)
    await terminal.wait_for(says(READY))
    await terminal.keys("ab", literal=True)
    await terminal.keys("M-Enter")
    await terminal.keys("cd", literal=True)
    await terminal.wait_for(lambda text: "│ cd" in text)
    assert sent(fake_llm) == []
    await terminal.keys("Enter")
    assert await wait_sent(fake_llm, 1) == ["ab\ncd"]
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


@pytest.mark.parametrize(
    ("keys", "wanted"),
    [
        (["a", "C-j", "b", "Enter"], "a\nb"),
        (["a", "M-Enter", "b", "Enter"], "a\nb"),
        (["a\\", "Enter", "b", "Enter"], "a\nb"),
        (["ab", "Left", "C-j", "Enter"], "a\nb"),
        (["ab", "Left", "M-Enter", "Enter"], "a\nb"),
    ],
    ids=["ctrl-j", "alt-enter", "backslash-enter", "left-then-ctrl-j", "left-then-alt-enter"],
)
async def test_a_new_line_in_a_burst_lands_where_it_was_typed(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal, keys: list[str], wanted: str
) -> None:
    """Issue 36 item 5: the keys of one write apply in order (Ctrl+J was a binding,
    run after the letters typed behind it: 'a' Ctrl+J 'b' gave ``ab`` and a line)."""
    fake_llm.add(Reply(text="Got it."))
    await start(terminal, tmp_path, fake_llm)
    await terminal.wait_for(says(READY))
    await terminal.keys(*keys)
    assert await wait_sent(fake_llm, 1) == [wanted]
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_enter_then_tab_in_one_burst_sends_both_in_order(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """Issue 36 item 5: 'x' Enter 'y' Tab: x is sent, and y is a follow-up (its
    turn was not known to run yet when Tab was read, which left y in the prompt)."""
    fake_llm.add(Reply(text="Answer x."))
    fake_llm.add(Reply(text="Answer y."))
    await start(terminal, tmp_path, fake_llm)
    await terminal.wait_for(says(READY))
    await terminal.keys("x", "Enter", "y", "Tab")
    assert await wait_sent(fake_llm, 2) == ["x", "y"]
    screen = await terminal.wait_for("Answer y.")
    assert EMPTY_PROMPT in screen
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_tab_on_an_idle_prompt_sends(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """Tab queues a follow-up; with no turn running it goes out at once. A Tab on the
    empty prompt before it loses nothing typed after it."""
    fake_llm.add(Reply(text="Answer q."))
    await start(terminal, tmp_path, fake_llm)
    await terminal.wait_for(says(READY))
    await terminal.keys("Tab", "q", "Tab")
    assert await wait_sent(fake_llm, 1) == ["q"]
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"


async def test_alt_enter_then_a_key_soon_after_adds_a_line(
    tmp_path: Path, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    """The fuzzer's seed 3: Alt+Enter, then the next key in a separate write a moment
    later, while Textual's parser still waited to see whether ESC CR went on; it gave
    up on the longer sequence and read ``^`` then Enter, which sent."""
    fake_llm.add(Reply(text="Got it."))
    await start(terminal, tmp_path, fake_llm)
    await terminal.wait_for(says(READY))
    for key in ("a", "M-Enter", "b", "M-Enter", "c"):  # one write each, back to back
        await terminal.keys(key)
    await terminal.wait_for(lambda text: "│ c" in text)
    assert sent(fake_llm) == []
    await terminal.keys("Enter")
    assert await wait_sent(fake_llm, 1) == ["a\nb\nc"]
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"
