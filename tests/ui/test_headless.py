"""The headless printer writing to a real UTF-8 stream, as stdout is.

A lone surrogate (half of an emoji cut by a provider, or a stdin line carrying
``\\ud83d``) cannot be encoded as UTF-8: the JSON formats write it as its escape, so
every line stays valid and reads back the same; text output shows U+FFFD for it.
"""

from __future__ import annotations

import io
import json

from dsh.llm import new_session_id
from dsh.session import Session, SessionHeader
from dsh.ui.headless_printer import Printer
from tests.session.turns import complete_turn

HALF = "\ud83d"  # the first half of 😀 (U+1F600) alone


def utf8_stream() -> io.TextIOWrapper:
    """What stdout is: text encoded as strict UTF-8 into bytes."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)


def written(stream: io.TextIOWrapper) -> str:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")  # strict: the bytes must be valid UTF-8


def session_with_half_an_emoji() -> Session:
    session = Session(SessionHeader(id=new_session_id(), created_at=1, cwd="/work"))
    complete_turn(session, f"say {HALF}", f"half an emoji: {HALF}", with_tool=True)
    return session


def test_stream_json_escapes_lone_surrogates_and_drops_no_event() -> None:
    session = session_with_half_an_emoji()
    out, err = utf8_stream(), utf8_stream()
    printer = Printer("stream-json", out, err)
    printer.records(session.events, 0)  # as the session's writer hands them over, stored
    lines = written(out).splitlines()
    assert [json.loads(line) for line in lines] == [e.to_dict() for e in session.events]
    assert "\\ud83d" in written(out)
    assert not printer.closed


def test_the_json_result_escapes_lone_surrogates() -> None:
    out, err = utf8_stream(), utf8_stream()
    printer = Printer("json", out, err)
    printer.json_line({"type": "result", "result": f"half an emoji: {HALF}"})
    [line] = written(out).splitlines()
    assert json.loads(line) == {"type": "result", "result": f"half an emoji: {HALF}"}


def test_text_output_shows_a_replacement_character() -> None:
    session = session_with_half_an_emoji()
    out, err = utf8_stream(), utf8_stream()
    printer = Printer("text", out, err)
    for event in session.events:
        printer(event)
    printer.end_line()
    assert written(out).endswith("\nhalf an emoji: \ufffd \n")
