"""A log written before the bundled plugins owned their event types reads the same.

``fixtures/plugin_events.jsonl`` was written by dsh when ``todo/write``,
``compaction/*`` and ``session/title*`` were core event types: three turns, a todo
list, a fallback, a model's and a person's title, a compaction that replaced the
first turns and one that failed. ``fixtures/plugin_events.derived.json`` is what that
dsh derived from it: the transcript entries and status (with the todo list and the
activity at each plugin event), the spend, the catalog's row, the Markdown export and
the messages the model would be sent next. With the plugins' vocabulary registered
the same code derives the same; without it the log still loads, is written back
byte for byte, and the model would still be sent the same messages (history changes
only through the core's surface ``replace``).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from dsh.llm import TokenUsage
from dsh.session import Session, session_spend
from dsh.session.catalog import Catalog
from dsh.session.jsonl import export_jsonl, parse_jsonl
from dsh.session.markdown import to_markdown
from dsh.session.payloads import OpaqueData
from dsh.ui.entries import TranscriptFold
from dsh.ui.render import visible_view
from tests.support.vocabulary import async_plugin_vocabulary

FIXTURES = Path(__file__).parent / "fixtures"
LOG = FIXTURES / "plugin_events.jsonl"
PLUGIN_TYPES = ("todo/", "compaction/", "session/title")


def pricing(provider: str, model: str, usage: TokenUsage, at: datetime.datetime) -> float:
    return (
        usage.input_tokens * 1e-6
        + (usage.cache_read_tokens or 0) * 1e-7
        + usage.output_tokens * 2e-6
    )


def todo_panel(fold: TranscriptFold) -> list[list[str]]:
    view = fold.panels.get("todo")
    if view is None:
        return []
    shown = visible_view(view)
    return [[content, status] for content, status in getattr(shown, "items", ())]


async def derived(home: Path) -> dict[str, Any]:
    """What dsh derives from the log, in the fixture's shape."""
    loaded, _ = parse_jsonl(LOG.read_bytes(), str(LOG))
    events = loaded.events
    fold = TranscriptFold(cost=pricing)
    points = {}
    for event in events:
        changed = fold.apply(event)
        if event.type == "todo/write" or event.type.startswith("compaction/"):
            points[f"{event.seq} {event.type}"] = {
                "state": fold.status.state,
                "panel": todo_panel(fold),
                "context": fold.status.context_tokens,
                "changed": len(changed),
            }
    entries = []
    for entry in fold.entries:
        shape: dict[str, Any] = {"kind": type(entry).__name__, "seq": entry.seq}
        for name in ("text", "level", "outcome", "reason", "cost"):
            if hasattr(entry, name):
                shape[name] = getattr(entry, name)
        if getattr(entry, "usage", None) is not None:
            shape["usage"] = entry.usage.to_dict()  # type: ignore[attr-defined]
        entries.append(shape)
    status = fold.status
    spent = session_spend(events, pricing)
    catalog = Catalog(home, pricing=pricing)
    try:
        await catalog.record(loaded.header, events, backend="jsonl", location=None)
        [row] = await catalog.list()
    finally:
        await catalog.close()
    return {
        "entries": entries,
        "points": points,
        "status": {
            "title": status.title,
            "context_tokens": status.context_tokens,
            "usage": status.usage.to_dict() if status.usage else None,
            "cost": status.cost,
            "state": status.state,
        },
        "spend": {
            "calls": spent.calls,
            "usage": spent.usage.to_dict() if spent.usage else None,
            "cost": spent.cost,
        },
        "catalog": {
            "title": row.title,
            "turns": row.turns,
            "input": row.input_tokens,
            "output": row.output_tokens,
            "cache": row.cache_read_tokens,
            "cost": row.cost,
        },
        "markdown": to_markdown(loaded.header, events),
        "messages": [
            message.model_dump(mode="json", exclude_none=True)
            for message in Session(loaded.header, events).derive_messages()
        ],
    }


def expected() -> dict[str, Any]:
    value: dict[str, Any] = json.loads((FIXTURES / "plugin_events.derived.json").read_text())
    return value


async def test_an_old_log_derives_the_same_with_the_plugins_loaded(tmp_path: Path) -> None:
    async with async_plugin_vocabulary():
        got = await derived(tmp_path)
    want = expected()
    assert got["entries"] == want["entries"]
    assert got["points"] == want["points"]
    assert got["status"] == want["status"]
    assert got["spend"] == want["spend"]
    assert got["catalog"] == want["catalog"]
    assert got["markdown"] == want["markdown"]
    assert got["messages"] == want["messages"]
    # What the fixture holds, so the comparison above means something.
    assert want["status"]["title"] == "IO test: fixed and faster"
    assert want["spend"]["calls"] == 6  # four answers, a summary and a model's title
    assert [p["state"] for p in want["points"].values()] == [
        "idle",
        "compacting",
        "compacting",
        "idle",
        "compacting",
        "thinking",
    ]
    assert [e["text"] for e in want["entries"] if e["kind"] == "NoticeEntry"] == [
        "Compacted 12,345 tokens of earlier conversation into a summary.",
        "Compaction failed: the model wrote no \u2407summary",
    ]


async def test_without_the_plugins_the_log_is_lossless_and_the_model_sees_the_same(
    tmp_path: Path,
) -> None:
    data = LOG.read_bytes()
    loaded, _ = parse_jsonl(data, str(LOG))
    plugin_events = [e for e in loaded.events if e.type.startswith(PLUGIN_TYPES)]
    assert len(plugin_events) == 10
    assert all(isinstance(e.data, OpaqueData) for e in plugin_events)
    assert export_jsonl(loaded.header, loaded.events).encode() == data  # byte for byte

    got = await derived(tmp_path)
    want = expected()
    assert got["messages"] == want["messages"]
    # What the plugins said is not shown without them; everything else is.
    assert got["status"]["title"] is None
    assert got["catalog"]["title"] is None
    assert got["markdown"].startswith("# dsh session\n")
    assert got["spend"]["calls"] == 4  # the summary's and the title's calls are theirs
    core_entries = [e for e in want["entries"] if e["kind"] != "NoticeEntry"]
    assert got["entries"] == core_entries
