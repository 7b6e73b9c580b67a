"""Fuzzing the JSONL loader with torn and damaged session files.

- A file cut at any byte (a crash mid-write) loads every complete line exactly, drops
  the torn one, and crash repair makes the log sound: ``check_log`` passes and the
  history is one a provider accepts.
- A file with any line damaged (bytes changed, cut, dropped, repeated or swapped, or
  a record with a forged seq put in) never fails to load while its header is whole;
  the lines before the damage load exactly, seq stays the index, no more events are
  made than the file's size allows, and the session can go on: the history is still
  one a provider accepts, and a new turn appended to it reloads.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh.session import Session, check_log
from dsh.session.jsonl import JsonlPersistence, export_jsonl, parse_jsonl
from dsh.session.persistence import MIN_EVENT_BYTES, CorruptSessionError, FormatUnsupportedError
from tests.reliability.logs import new_session, provider_problems, valid_logs
from tests.reliability.profiles import fuzz
from tests.reliability.runs import dicts
from tests.session.turns import complete_turn


def encoded(session: Session) -> bytes:
    return export_jsonl(session.header, session.events).encode()


def lines_of(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]  # each line without its newline; the file ends in one


@fuzz(150)
@given(valid_logs(), st.data())
def test_a_file_cut_anywhere_loads_what_is_whole_and_repairs_to_a_sound_log(
    session: Session, data: st.DataObject
) -> None:
    whole = encoded(session)
    header_size = whole.index(b"\n") + 1
    cut = data.draw(st.integers(0, len(whole)))
    if cut < header_size:
        with pytest.raises(CorruptSessionError):
            parse_jsonl(whole[:cut], "cut")
        return
    loaded, good = parse_jsonl(whole[:cut], "cut")
    assert whole[:good].endswith(b"\n")
    assert good <= cut
    complete = parse_jsonl(whole[:good], "whole lines")[0]
    stored = loaded.events[: len(loaded.events) - len(loaded.repaired)]
    assert dicts(stored) == dicts(complete.events[: len(stored)])
    assert dicts(stored) == dicts(session.events[: len(stored)])  # nothing changed
    assert {issue.kind for issue in loaded.issues} <= {"torn-tail", "interrupted-turn"}
    assert check_log(loaded.events) == []
    assert provider_problems(Session(loaded.header, loaded.events).derive_messages()) == []


@st.composite
def damaged(draw: st.DrawFn) -> tuple[Session, bytes, int]:
    """A valid log's file with one kind of damage, and the index of the first line
    (counting the header as 0) it touched."""
    session = draw(valid_logs(crash=False))
    lines = lines_of(encoded(session))
    at = draw(st.integers(1, len(lines) - 1))
    line = lines[at]
    match draw(st.sampled_from(["bytes", "cut", "drop", "repeat", "swap", "garbage", "forged"])):
        case "bytes":
            start = draw(st.integers(0, len(line)))
            end = draw(st.integers(start, min(len(line), start + 8)))
            lines[at] = line[:start] + draw(st.binary(max_size=8)) + line[end:]
        case "cut":
            lines[at] = line[: draw(st.integers(0, len(line)))]
        case "drop":
            del lines[at]
        case "repeat":
            lines.insert(at, line)
            at += 1
        case "swap":
            other = draw(st.integers(1, len(lines) - 1))
            lines[at], lines[other] = lines[other], line
            at = min(at, other)
        case "forged":
            seq = draw(st.one_of(st.integers(0, 2 * len(lines)), st.integers(0, 10**12)))
            forged = {"type": "x/forged", "seq": seq, "time": 1, "data": {}}
            lines.insert(at, json.dumps(forged).encode())
        case _:
            lines.insert(at, draw(st.binary(min_size=1, max_size=40)).replace(b"\n", b" "))
    return session, b"".join(line + b"\n" for line in lines), at


@fuzz(300)
@given(damaged())
def test_a_damaged_line_never_stops_the_session_from_loading_or_going_on(
    case: tuple[Session, bytes, int],
) -> None:
    _session, data, at = case
    try:
        loaded, _ = parse_jsonl(data, "damaged")
    except (CorruptSessionError, FormatUnsupportedError) as error:
        raise AssertionError(f"a damaged body line made the file unreadable: {error}") from None
    assert [event.seq for event in loaded.events] == list(range(len(loaded.events)))
    assert len(loaded.events) - len(loaded.repaired) <= len(data) // MIN_EVENT_BYTES
    before = parse_jsonl(b"".join(line + b"\n" for line in lines_of(data)[:at]), "before")[0]
    intact = before.events[: len(before.events) - len(before.repaired)]
    assert dicts(loaded.events[: len(intact)]) == dicts(intact)
    resumed = Session(loaded.header, loaded.events)
    history = resumed.derive_messages()
    assert provider_problems(history) == [], [issue.detail for issue in loaded.issues]


@fuzz(40)
@given(damaged())
def test_a_damaged_file_is_repaired_once_and_takes_new_turns(
    case: tuple[Session, bytes, int],
) -> None:
    session, data, _ = case
    asyncio.run(_repair_and_continue(session, data))


async def _repair_and_continue(session: Session, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as home:
        backend = JsonlPersistence(Path(home))
        path = backend.path_for(session.header)
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        first = await backend.load(session.id)
        await backend.close()
        # Loading wrote the repair; a second load repairs nothing new.
        backend = JsonlPersistence(Path(home))
        second = await backend.load(session.id)
        assert dicts(second.events) == dicts(first.events)
        assert second.repaired == []
        assert {i.kind for i in second.issues} <= {"corrupt-line"}
        live = new_session(second.events, second.header)
        stored = len(live.events)
        complete_turn(live, "and now?", "carrying on", with_tool=True)
        await backend.append(session.id, live.events[len(second.events) :])
        assert stored >= len(second.events)
        await backend.close()
        backend = JsonlPersistence(Path(home))
        third = await backend.load(session.id)
        await backend.close()
        assert dicts(third.events) == dicts(live.events)
        assert provider_problems(live.derive_messages()) == []
