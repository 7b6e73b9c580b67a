"""Stored records: events as JSON objects, with runs of delta chunks packed.

Providers stream a token or two per chunk, so most of a raw log is the envelope of
``assistant/chunk`` events. A run of three or more consecutive delta chunks of one
block is stored as one record (``text-chunks``, ``reasoning-chunks`` or
``tool-call-chunks``) and expanded back to the exact original events on load. Only
shapes the packer fully recognises are packed; anything else is stored verbatim.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeGuard

from dsh.llm import CallId, ReasoningDelta, TextDelta, ToolCallDelta
from dsh.session.events import EventFormatError, SessionEvent, parse_event
from dsh.session.payloads import AssistantChunk
from dsh.wire import dumps

MIN_RUN = 3
ROW_TYPES = {"text-chunks", "reasoning-chunks", "tool-call-chunks"}


# A lone surrogate (a model's "\\ud83d" cut from its pair, a path's undecodable byte)
# is a valid JSON escape but cannot be written as UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udce9``), so that
    it encodes as UTF-8: in JSON the escape reads back as the surrogate; in a plain
    SQLite text column it is what is stored, matched and shown."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _run_key(event: SessionEvent) -> tuple[Any, ...] | None:
    """Events with equal keys may share a packed record; None never packs."""
    if event.type != "assistant/chunk" or event.ignorable or event.surface_op is not None:
        return None
    data = event.data
    if not isinstance(data, AssistantChunk):
        return None
    chunk = data.chunk
    match chunk:
        case TextDelta():
            return ("text-chunks", data.turn, data.step, chunk.index)
        case ReasoningDelta():
            return ("reasoning-chunks", data.turn, data.step, chunk.index)
        case ToolCallDelta():
            return ("tool-call-chunks", data.turn, data.step, chunk.index, chunk.id, chunk.name)
        case _:
            return None


def _pack(run: Sequence[SessionEvent]) -> dict[str, Any]:
    key = _run_key(run[0])
    assert key is not None
    kind, turn, step, index = key[:4]
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "index": index,
        "dt": [b.time - a.time for a, b in itertools.pairwise(run)],
    }
    if kind == "tool-call-chunks":
        data["id"] = key[4]
        if key[5] is not None:
            data["name"] = key[5]
        data["args"] = [e.data.chunk.arguments_delta for e in run]
    else:
        data["texts"] = [e.data.chunk.text for e in run]
    return {"type": kind, "seq0": run[0].seq, "time0": run[0].time, "data": data}


def encode_lines(events: Sequence[SessionEvent]) -> str:
    """The stored records for ``events`` as JSON lines, each ending in a newline."""
    return "".join(
        (dumps(record) if isinstance(record, dict) else record) + "\n"
        for record in _records(events, SessionEvent.to_json)
    )


def encode(events: Sequence[SessionEvent]) -> Iterator[dict[str, Any]]:
    """Stored records for ``events``, packing delta runs."""
    for record in _records(events, SessionEvent.to_dict):
        assert isinstance(record, dict)
        yield record


def _records(
    events: Sequence[SessionEvent], single: Callable[[SessionEvent], Any]
) -> Iterator[Any]:
    i = 0
    while i < len(events):
        key = _run_key(events[i])
        j = i + 1
        if key is not None:
            while j < len(events) and _run_key(events[j]) == key:
                j += 1
        if key is not None and j - i >= MIN_RUN:
            yield _pack(events[i:j])
        else:
            for event in events[i:j]:
                yield single(event)
        i = j


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def decode(record: Any) -> list[SessionEvent]:
    """The events a stored record holds (one, or a packed run)."""
    if not isinstance(record, dict) or record.get("type") not in ROW_TYPES:
        return [parse_event(record)]
    kind = record["type"]
    seq0, time0, data = record.get("seq0"), record.get("time0"), record.get("data")
    if not (isinstance(seq0, int) and isinstance(time0, int) and isinstance(data, dict)):
        raise EventFormatError("malformed packed record: seq0, time0, data")
    turn, step, index = data.get("turn"), data.get("step"), data.get("index")
    if not (_is_int(turn) and _is_int(step) and _is_int(index)):
        raise EventFormatError("malformed packed record: turn, step, index")
    pieces = data.get("args" if kind == "tool-call-chunks" else "texts")
    if not (isinstance(pieces, list) and all(isinstance(p, str) for p in pieces)):
        raise EventFormatError("malformed packed record: pieces must be strings")
    gaps = data.get("dt")
    if not (isinstance(gaps, list) and len(gaps) == len(pieces) - 1 and all(map(_is_int, gaps))):
        raise EventFormatError("malformed packed record: dt must hold one gap per later piece")
    call_id, name = data.get("id", ""), data.get("name")
    if not (isinstance(call_id, str) and (name is None or isinstance(name, str))):
        raise EventFormatError("malformed packed record: id, name")

    events: list[SessionEvent] = []
    stamp = time0
    for k, piece in enumerate(pieces):
        if k:
            stamp += gaps[k - 1]
        if kind == "text-chunks":
            chunk: Any = TextDelta(index=index, text=piece)
        elif kind == "reasoning-chunks":
            chunk = ReasoningDelta(index=index, text=piece)
        else:
            chunk = ToolCallDelta(index=index, id=CallId(call_id), name=name, arguments_delta=piece)
        events.append(
            SessionEvent(
                "assistant/chunk",
                seq0 + k,
                stamp,
                AssistantChunk(turn=turn, step=step, chunk=chunk),
            )
        )
    return events
