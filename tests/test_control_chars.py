"""The one function every surface shows untrusted text through, and its helpers."""

from __future__ import annotations

import io
import json
import random

import pytest
from rich.text import Text

from dsh.control_chars import VisibleStream, escape_in_json, is_visible, printable, visible
from dsh.ui.plain import plain_console

TERMINAL_CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
KEPT = {"\n", "\t"}


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b]52;c;cHduZWQ=\x07b", "a␛]52;c;cHduZWQ=␇b"),
        ("\x1b]0;title\x07", "␛]0;title␇"),
        ("\x1b]8;;https://x/\x1b\\link\x1b]8;;\x1b\\", "␛]8;;https://x/␛\\link␛]8;;␛\\"),
        ("\x1b[2J\x1b[?1049h", "␛[2J␛[?1049h"),
        ("bare\x1b", "bare␛"),
        ("\x9b31m\x9d0;t\x9c", "␛[31m␛]0;t␛\\"),
        ("one\r\ntwo\rthree", "one\ntwo␍three"),
        ("del\x7f bs\x08 nul\x00", "del␡ bs␈ nul␀"),
        ("rm \u202eexe.txt", "rm <U+202E>exe.txt"),
        ("half \ud83d emoji", "half \ufffd emoji"),
        ("tab\tand\nnewline kept; ünïcödé 😀 ✓", "tab\tand\nnewline kept; ünïcödé 😀 ✓"),
    ],
)
def test_visible_shows_every_control_as_a_picture(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_visible_leaves_nothing_a_terminal_obeys_and_is_idempotent() -> None:
    rng = random.Random(18)
    alphabet = [*TERMINAL_CONTROLS, "a", "[", "]", ";", "\u202e", "\u2066", "\ud800", "é"]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        shown = visible(text)
        assert not any(c in shown for c in TERMINAL_CONTROLS if c not in KEPT)
        assert visible(shown) == shown
        assert is_visible(shown)
        shown.encode("utf-8")  # never a lone surrogate
        line = visible(text, one_line=True)
        assert not any(c in line for c in TERMINAL_CONTROLS)
        assert "\u2028" not in visible("a\u2028b", one_line=True)


def test_plain_text_is_returned_as_is() -> None:
    text = "nothing to see here\n\twith a tab, ünïcödé and 😀"
    assert visible(text) is text
    assert is_visible(text)


def test_printable_changes_only_lone_surrogates() -> None:
    assert printable("\x1b[2J \ud800") == "\x1b[2J \ufffd"


def test_escape_in_json_keeps_the_value_and_escapes_what_a_terminal_obeys() -> None:
    rng = random.Random(52)
    alphabet = [*TERMINAL_CONTROLS, "x", '"', "\\", "\u2028", "\u202e", "\ud83d", "é", "😀"]
    for _ in range(300):
        value = {"t": "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))}
        line = escape_in_json(json.dumps(value, ensure_ascii=False))
        assert json.loads(line) == value
        assert not any(c in line for c in TERMINAL_CONTROLS)
        assert "\u202e" not in line
        line.encode("utf-8")


def test_a_visible_stream_writes_pictures_and_is_not_a_terminal() -> None:
    target = io.StringIO()
    stream = VisibleStream.around(target)
    assert VisibleStream.around(stream) is stream  # never wrapped twice
    print("note: \x1b]0;x\x07", file=stream)
    stream.writelines(["\x9b2J"])
    stream.flush()
    assert target.getvalue() == "note: ␛]0;x␇\n␛[2J"
    assert not stream.isatty()


def test_plain_modes_console_shows_whatever_is_printed_as_pictures() -> None:
    out = io.StringIO()
    console = plain_console(out, force_terminal=True)
    console.print(Text("\x1b]52;c;eA==\x07 bold", style="bold"))
    console.print("\x1b[2J", Text("\x9b2J"))
    printed = out.getvalue()
    assert "␛]52;c;eA== bold" in printed  # (rich drops a BEL itself)
    assert "␛[2J ␛[2J" in printed
    assert "\x1b]" not in printed
    assert "\x1b[2J" not in printed
    assert "\x1b[1m" in printed  # its own styles still reach the terminal
