"""The structured comparison of a replay with its recording.

Each request the replaying loop made is compared with the recorded request in the
same place: its parameters (provider, model, effort, temperature, output cap, stop),
the system prompt (the first line that differs), the tools (added, removed or changed,
by name, and what of a changed one), and the messages (the first that differs, and
the field: ``messages[3].content[0].text``). Then the tool calls and their results,
then how each turn ended. Paths of the scratch folder the replay worked in stand for
the recorded folder.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dsh.llm import GenerateOptions
from dsh.replay.recorded import Recording
from dsh.replay.run import ReplayRun
from dsh.session import HistoryRewound, SessionEvent, ToolCall, ToolResult, TurnEnd

PARAMETERS = ("provider", "model", "reasoning_effort", "temperature", "max_tokens", "stop")
SHOWN = 160
"""How much of a differing value a report shows."""


@dataclass(frozen=True)
class Difference:
    where: str
    """``request 3 (turn 2, step 1)``, ``tool call 2 (read)``, ``turn 1``."""
    what: str
    """``system prompt line 12``, ``tool read: parameters``, ``messages[4].content[0].text``."""
    recorded: str | None = None
    now: str | None = None

    def describe(self) -> str:
        said = f"{self.where}: {self.what}"
        if self.recorded is not None or self.now is not None:
            said += f"\n    recorded: {self.recorded}\n    now:      {self.now}"
        return said


@dataclass
class Step:
    """One step of the report: a request, a tool call or a turn's end."""

    where: str
    differences: list[Difference] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences


@dataclass
class Report:
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[Difference]:
        return [d for step in self.steps for d in step.differences]

    @property
    def identical(self) -> bool:
        return not self.differences

    @property
    def first(self) -> Difference | None:
        found = self.differences
        return found[0] if found else None

    def to_json(self) -> dict[str, Any]:
        first = self.first
        return {
            "identical": self.identical,
            "firstDifference": asdict(first) if first is not None else None,
            "steps": [
                {
                    "where": s.where,
                    "same": s.same,
                    "differences": [asdict(d) for d in s.differences],
                }
                for s in self.steps
            ],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        lines = []
        for step in self.steps:
            lines.append(f"{step.where}: {'same' if step.same else 'DIFFERS'}")
            for difference in step.differences:
                lines.extend("  " + line for line in difference.describe().splitlines())
        for note in self.notes:
            lines.append(f"note: {note}")
        first = self.first
        if first is None:
            lines.append(f"identical: {len(self.steps)} steps compared")
        else:
            lines.append(f"first difference: {first.where}: {first.what}")
        return "\n".join(lines) + "\n"


def compare(run: ReplayRun) -> Report:
    recording = run.recording
    report = Report(notes=[*recording.notes, *run.unserved, *run.unapplied])
    if run.stopped:
        report.notes.append(run.stopped)
    report.notes.extend(_stood_in_notes(run))
    report.notes.extend(run.left_out)
    swap = {run.cwd: recording.header.cwd or run.cwd}
    fork = run.live_after
    recorded = [r for r in recording.requests if fork is None or r.turn <= fork]
    retried = _retries(run.events)
    for index in range(max(len(recorded), len(run.requests))):
        if index < len(recorded):
            r = recorded[index]
            where = f"request {index + 1} (turn {r.turn}, step {r.step})"
        else:
            where = f"request {index + 1}"
        step = Step(where)
        report.steps.append(step)
        if index >= len(run.requests):
            step.differences.append(Difference(where, "not made by the replay"))
            continue
        if index >= len(recorded):
            step.differences.append(Difference(where, "not in the recording"))
            continue
        step.differences.extend(
            compare_requests(where, recorded[index].options, _swapped(run.requests[index], swap))
        )
        failures = recorded[index].failures
        now = retried.get(index, 0)
        if now != len(failures):
            step.differences.append(
                Difference(where, "attempts retried", str(len(failures)), str(now))
            )
    events = run.events
    if fork is not None:
        events = _through_turn(events, fork)
        recording = _recording_through(recording, fork)
        report.notes.extend(_fork_notes(run, fork))
    _compare_tools(report, recording, events)
    _compare_rewinds(report, recording.events, events)
    _compare_ends(report, recording, events)
    return report


def _stood_in_notes(run: ReplayRun) -> list[str]:
    """Which tools the replaying runtime lacked (a plugin or MCP server missing here),
    and how their calls were answered."""
    if not run.stood_in:
        return []
    names = ", ".join(run.stood_in)
    if run.tools == "recorded":
        return [
            f"not in this dsh, stood in for (offered as recorded, answered from the log): {names}"
        ]
    return [
        f"not in this dsh, unavailable (offered as recorded, each call answered with an "
        f"error): {names}"
    ]


def _retries(events: Sequence[SessionEvent]) -> dict[int, int]:
    """How many times the replay retried each conversation request (``llm/retry``),
    by the request's index."""
    counts: dict[int, int] = {}
    index = -1
    for event in events:
        if event.type == "request/header":
            index += 1
        elif event.type == "llm/retry":
            counts[index] = counts.get(index, 0) + 1
    return counts


def _through_turn(events: Sequence[SessionEvent], turn: int) -> list[SessionEvent]:
    """The events up to the end of turn ``turn``."""
    for event in events:
        if isinstance(event.data, TurnEnd) and event.data.turn == turn:
            return list(events[: event.seq + 1])
    return list(events)


def _recording_through(recording: Recording, turn: int) -> Recording:
    from dataclasses import replace

    return replace(
        recording,
        calls=[c for c in recording.calls if c.turn <= turn],
        turn_ends=[e for e in recording.turn_ends if e.turn <= turn],
    )


def _fork_notes(run: ReplayRun, turn: int) -> list[str]:
    """What each turn after the fork answered, beside what the recording answered."""
    from dsh.session import AssistantMessageData

    def answers(events: Sequence[SessionEvent]) -> dict[int, str]:
        said: dict[int, str] = {}
        for event in events:
            if isinstance(event.data, AssistantMessageData) and event.data.turn > turn:
                text = event.data.message.text().strip()
                if text:
                    said[event.data.turn] = text
        return said

    recorded, now = answers(run.recording.events), answers(run.events)
    model = run.live_requests[0].model if run.live_requests else "the model"
    notes = [f"turns after {turn} went to {model} live ({len(run.live_requests)} requests)"]
    for number in sorted(set(recorded) | set(now)):
        notes.append(
            f"turn {number}: recorded answer {_show(recorded.get(number))!r}; "
            f"{model} answered {_show(now.get(number))!r}"
        )
    return notes


def compare_requests(
    where: str, recorded: GenerateOptions, now: GenerateOptions
) -> list[Difference]:
    """What differs between two requests, field by field."""
    out: list[Difference] = []
    for name in PARAMETERS:
        a, b = getattr(recorded, name), getattr(now, name)
        if a != b:
            out.append(Difference(where, name.replace("_", " "), _show(a), _show(b)))
    out.extend(_system(where, recorded.system or "", now.system or ""))
    out.extend(_tools(where, recorded.tools or (), now.tools or ()))
    out.extend(_messages(where, recorded, now))
    return out


def _system(where: str, recorded: str, now: str) -> list[Difference]:
    """The first place the system prompts differ, by line: what was changed, added or
    taken out there (blank lines around a section are not what names it)."""
    if recorded == now:
        return []
    old, new = recorded.splitlines(), now.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        kind = {"replace": "changed", "insert": "added", "delete": "taken out"}[tag]
        was = "\n".join(line for line in old[i1:i2] if line.strip()) or None
        now_text = "\n".join(line for line in new[j1:j2] if line.strip()) or None
        return [
            Difference(where, f"system prompt line {i1 + 1} ({kind})", _show(was), _show(now_text))
        ]
    return [Difference(where, "system prompt (line endings)")]


def _tools(where: str, recorded: Sequence[Any], now: Sequence[Any]) -> list[Difference]:
    old = {t.name: _plain(t) for t in recorded}
    new = {t.name: _plain(t) for t in now}
    out: list[Difference] = []
    for name in sorted(old.keys() - new.keys()):
        out.append(Difference(where, f"tool {name}: removed"))
    for name in sorted(new.keys() - old.keys()):
        out.append(Difference(where, f"tool {name}: added"))
    for name in sorted(old.keys() & new.keys()):
        if old[name] != new[name]:
            path, a, b = _first_difference(old[name], new[name], "")
            out.append(Difference(where, f"tool {name}: {path.lstrip('.') or 'schema'}", a, b))
    if not out and [t.name for t in recorded] != [t.name for t in now]:
        out.append(
            Difference(
                where,
                "tools: order",
                _show([t.name for t in recorded]),
                _show([t.name for t in now]),
            )
        )
    return out


def _messages(where: str, recorded: GenerateOptions, now: GenerateOptions) -> list[Difference]:
    old = _canonical_ids([_message(m) for m in recorded.messages])
    new = _canonical_ids([_message(m) for m in now.messages])
    for index in range(min(len(old), len(new))):
        if old[index] != new[index]:
            path, a, b = _first_difference(old[index], new[index], f"messages[{index}]")
            return [Difference(where, path, a, b)]
    if len(old) != len(new):
        return [
            Difference(
                where,
                f"messages: {len(old)} recorded, {len(new)} now",
                _show(old[len(new)] if len(old) > len(new) else None),
                _show(new[len(old)] if len(new) > len(old) else None),
            )
        ]
    return []


def _compare_tools(report: Report, recording: Recording, events: Sequence[SessionEvent]) -> None:
    calls: list[tuple[ToolCall, ToolResult | None]] = []
    results = {e.seq: e.data for e in events if isinstance(e.data, ToolResult)}
    by_call: dict[int, ToolResult] = {}
    for event in events:
        if isinstance(event.data, ToolResult):
            for seq in event.source_event_seqs or ():
                by_call[seq] = event.data
    del results
    for event in events:
        if isinstance(event.data, ToolCall):
            calls.append((event.data, by_call.get(event.seq)))
    for index in range(max(len(recording.calls), len(calls))):
        old = recording.calls[index] if index < len(recording.calls) else None
        new = calls[index] if index < len(calls) else None
        name = (old.call.name if old else new[0].name) if (old or new) else "?"  # type: ignore[index]
        where = f"tool call {index + 1} ({name})"
        step = Step(where)
        report.steps.append(step)
        if old is None or new is None:
            step.differences.append(
                Difference(
                    where, "not made by the replay" if new is None else "not in the recording"
                )
            )
            continue
        call, result = new
        for label, a, b in (
            ("name", old.call.name, call.name),
            ("call id", old.call.call_id, call.call_id),
            ("arguments", old.call.arguments, call.arguments),
        ):
            if a != b:
                step.differences.append(Difference(where, label, _show(a), _show(b)))
        if old.result is not None and result is not None:
            a_json = _message(old.result.message)
            b_json = _message(result.message)
            if a_json != b_json:
                path, x, y = _first_difference(a_json, b_json, "result")
                step.differences.append(Difference(where, path, x, y))
            codes = (
                old.result.error.code if old.result.error else None,
                result.error.code if result.error else None,
            )
            if codes[0] != codes[1]:
                step.differences.append(Difference(where, "error code", codes[0], codes[1]))


def _compare_rewinds(
    report: Report, recorded: Sequence[SessionEvent], events: Sequence[SessionEvent]
) -> None:
    """Each time the conversation went back (``history/rewound``): to before the same
    turn. Whether the code went with it is not compared: with recorded tools the
    replay has no files to put back."""
    old = [e.data.turn for e in recorded if isinstance(e.data, HistoryRewound)]
    new = [e.data.turn for e in events if isinstance(e.data, HistoryRewound)]
    for index in range(max(len(old), len(new))):
        where = f"rewind {index + 1}"
        step = Step(where)
        report.steps.append(step)
        a = f"to before turn {old[index]}" if index < len(old) else None
        b = f"to before turn {new[index]}" if index < len(new) else None
        if a != b:
            step.differences.append(Difference(where, "the conversation went back", a, b))


def _compare_ends(report: Report, recording: Recording, events: Sequence[SessionEvent]) -> None:
    ends = [e.data for e in events if isinstance(e.data, TurnEnd)]
    for index in range(max(len(recording.turn_ends), len(ends))):
        old = recording.turn_ends[index] if index < len(recording.turn_ends) else None
        new = ends[index] if index < len(ends) else None
        where = f"turn {index + 1} end"
        step = Step(where)
        report.steps.append(step)
        a = _end(old) if old is not None else None
        b = _end(new) if new is not None else None
        if a != b:
            step.differences.append(Difference(where, "how the turn ended", a, b))


def _end(end: TurnEnd) -> str:
    reason = end.reason
    kind = str(getattr(reason, "kind", type(reason).__name__))
    cause = getattr(reason, "reason", None)
    if cause is not None:
        kind += f" ({getattr(cause, 'kind', type(cause).__name__)})"
    error = getattr(reason, "error", None)
    if error is not None:
        kind += f" ({getattr(error, 'code', None) or 'no code'})"
    return kind


# ---------------------------------------------------------------------- values


def _message(message: Any) -> Any:
    """A message as compared: its JSON form without its id (ids are made fresh)."""
    data = message.model_dump(mode="json", exclude_none=True, by_alias=True)
    data.pop("id", None)
    return data


_ID = re.compile(r"^(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def _canonical_ids(value: Any, seen: dict[str, str] | None = None) -> Any:
    """``value`` with each random id (a uuid, as dsh makes them fresh for every run)
    replaced by its order of first appearance: two runs that make the same ids in
    the same places compare equal, and an id reused where a fresh one was made does
    not."""
    seen = {} if seen is None else seen
    if isinstance(value, dict):
        return {key: _canonical_ids(item, seen) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical_ids(item, seen) for item in value]
    if isinstance(value, str) and _ID.match(value):
        return seen.setdefault(value, f"<id {len(seen) + 1}>")
    return value


def _plain(model: Any) -> Any:
    return model.model_dump(mode="json", exclude_none=True, by_alias=True)


def _swapped(options: GenerateOptions, swap: Mapping[str, str]) -> GenerateOptions:
    """``options`` with the scratch paths put back to the recorded ones."""
    pairs = [(scratch, recorded) for scratch, recorded in swap.items() if scratch != recorded]
    if not pairs:
        return options

    def put_back(value: Any) -> Any:
        if isinstance(value, str):
            for scratch, recorded in pairs:
                value = value.replace(scratch, recorded)
            return value
        if isinstance(value, dict):
            return {key: put_back(item) for key, item in value.items()}
        if isinstance(value, list):
            return [put_back(item) for item in value]
        return value

    # Not through JSON text: a lone surrogate a model sent is kept, not refused.
    return GenerateOptions.model_validate(put_back(options.model_dump(exclude={"signal"})))


def _first_difference(a: Any, b: Any, path: str) -> tuple[str, str | None, str | None]:
    """The path of the first place two JSON values differ, and the values there."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a.keys(), *(k for k in b if k not in a)]:
            if a.get(key) != b.get(key):
                if key not in a or key not in b:
                    return f"{path}.{key}", _show(a.get(key)), _show(b.get(key))
                return _first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        for index in range(min(len(a), len(b))):
            if a[index] != b[index]:
                return _first_difference(a[index], b[index], f"{path}[{index}]")
        if len(a) != len(b):
            return f"{path} (length {len(a)} recorded, {len(b)} now)", None, None
    if isinstance(a, str) and isinstance(b, str):
        return path, _show_around(a, b), _show_around(b, a)
    return path, _show(a), _show(b)


def _show(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _show_around(text: str, other: str) -> str:
    """``text`` near where it first departs from ``other``."""
    at = next((i for i, (x, y) in enumerate(zip(text, other, strict=False)) if x != y), None)
    if at is None:
        at = min(len(text), len(other))
    start = max(0, at - 40)
    shown = text[start : start + SHOWN]
    return ("…" if start else "") + shown + ("…" if start + SHOWN < len(text) else "")
