"""The persistence contract: every backend passes the same tests (P1-P7 and more)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from dsh.llm import CallId, SessionId, new_session_id, user_text
from dsh.session import (
    CorruptSessionError,
    FormatUnsupportedError,
    SeqMismatchError,
    Session,
    SessionHeader,
    SessionNotFoundError,
    SessionPersistence,
    StepStart,
    ToolCall,
    TurnStart,
    check_log,
    parse_event,
)
from dsh.session.jsonl import JsonlPersistence, export_jsonl, parse_jsonl
from dsh.session.payloads import OpaqueData
from dsh.session.sqlite import SqlitePersistence
from dsh.wire import dumps
from dsh_plugins.title.events import SessionTitle
from tests.session.turns import answer_calls, complete_turn, stream_step

Factory = Callable[[Path], SessionPersistence]
BACKENDS: dict[str, Factory] = {"jsonl": JsonlPersistence, "sqlite": SqlitePersistence}


@pytest.fixture(params=list(BACKENDS))
def factory(request: pytest.FixtureRequest) -> Factory:
    return BACKENDS[request.param]


@pytest.fixture
async def store(factory: Factory, tmp_path: Path) -> AsyncIterator[SessionPersistence]:
    backend = factory(tmp_path)
    yield backend
    await backend.close()


def new_session(cwd: str = "/work/project") -> Session:
    return Session(SessionHeader(id=new_session_id(), created_at=1, cwd=cwd, model="m"))


def stored_form(events: object) -> list[dict[str, object]]:
    return [event.to_dict() for event in events]  # type: ignore[attr-defined]


async def fresh_load(factory: Factory, home: Path, session_id: SessionId):  # type: ignore[no-untyped-def]
    """Load through a new backend instance: what another process would see."""
    backend = factory(home)
    try:
        return await backend.load(session_id)
    finally:
        await backend.close()


# ---------------------------------------------------------------------- contract


async def test_load_returns_exactly_what_was_appended(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:  # P1, P6
    session = new_session()
    await store.create(session.header)
    complete_turn(session, "read the app", "It is a CLI.")
    await store.append(session.id, session.events[:10])
    complete_turn(session, "and the tests?", "They use pytest.", with_tool=False)
    await store.append(session.id, session.events[10:])
    loaded = await fresh_load(factory, tmp_path, session.id)
    assert loaded.header == session.header
    assert stored_form(loaded.events) == stored_form(session.events)
    assert loaded.events == list(session.events)
    assert loaded.issues == []
    assert loaded.repaired == []


async def test_append_must_continue_at_the_next_seq(store: SessionPersistence) -> None:  # P2
    session = new_session()
    await store.create(session.header)
    complete_turn(session, "a", "b", with_tool=False)
    await store.append(session.id, session.events[:3])
    with pytest.raises(SeqMismatchError, match="starts at seq 4"):
        await store.append(session.id, session.events[4:])
    with pytest.raises(SeqMismatchError):
        await store.append(session.id, session.events[:3])
    await store.append(session.id, session.events[3:])


async def test_a_session_never_appended_to_leaves_nothing(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:  # P5
    session = new_session()
    await store.create(session.header)
    assert await store.exists(session.id)
    other = factory(tmp_path)
    try:
        assert not await other.exists(session.id)
        assert await other.list() == []
    finally:
        await other.close()
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").rglob("*.jsonl"))


async def test_loading_a_crashed_turn_closes_it_durably(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:  # P4
    session = new_session()
    await store.create(session.header)
    complete_turn(session, "first", "done", with_tool=False)
    session.append("turn/start", TurnStart(turn=2))
    session.append("user/message", user_text("run the build"))
    session.append("step/start", StepStart(turn=2, step=1))
    message = stream_step(
        session,
        2,
        1,
        text="Running both.",
        calls=[
            ("started", "bash", {"command": "make"}),
            ("never", "bash", {"command": "make test"}),
        ],
    )
    first_only = message.model_copy(update={"content": message.content[:2]})
    answer_calls(session, 2, 1, first_only)  # "started" gets its result...
    session.append(
        "tool/call",
        # ...a third call was dispatched but the process died before its result.
        ToolCall(turn=2, step=1, call_id=CallId("started-2"), name="bash", arguments="{}"),
    )
    await store.append(session.id, session.events)

    loaded = await fresh_load(factory, tmp_path, session.id)
    tail = [(e.type, getattr(e.data, "error", None)) for e in loaded.repaired]
    assert [t for t, _ in tail] == ["tool/result", "tool/result", "step/end", "turn/end"]
    codes = {e.data.message.result.tool_call_id: e.data.error.code for e in loaded.repaired[:2]}
    assert codes == {"never": "TOOL_NOT_STARTED", "started-2": "TOOL_OUTCOME_UNKNOWN"}
    assert loaded.events[-1].data.reason.kind == "interrupted"
    assert all(e.time == session.events[-1].time for e in loaded.repaired)
    assert check_log(loaded.events) == []
    assert [i.kind for i in loaded.issues] == ["interrupted-turn"]

    again = await fresh_load(factory, tmp_path, session.id)  # the repair was written
    assert again.issues == []
    assert again.repaired == []
    assert stored_form(again.events) == stored_form(loaded.events)


async def test_inspect_repairs_in_memory_only(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:
    session = new_session()
    await store.create(session.header)
    session.append("turn/start", TurnStart(turn=1))
    await store.append(session.id, session.events)
    viewer = factory(tmp_path)
    try:
        seen = await viewer.inspect(session.id)
        assert [e.type for e in seen.repaired] == ["turn/end"]
        seen_again = await viewer.inspect(session.id)
        assert [e.type for e in seen_again.repaired] == ["turn/end"]
    finally:
        await viewer.close()


async def test_balanced_logs_load_unchanged(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:
    session = new_session()
    await store.create(session.header)
    for n in range(3):
        complete_turn(session, f"question {n}", f"answer {n}", with_tool=n % 2 == 0)
    await store.append(session.id, session.events)
    loaded = await fresh_load(factory, tmp_path, session.id)
    assert loaded.repaired == []
    assert loaded.issues == []
    assert Session(loaded.header, loaded.events).derive_messages() == session.derive_messages()


async def test_appends_continue_after_load(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:
    session = new_session()
    await store.create(session.header)
    complete_turn(session, "one", "uno", with_tool=False)
    await store.append(session.id, session.events)

    backend = factory(tmp_path)
    loaded = await backend.load(session.id)
    resumed = Session(loaded.header, loaded.events)
    complete_turn(resumed, "two", "dos")
    await backend.append(session.id, resumed.events[len(loaded.events) :])
    await backend.close()

    final = await fresh_load(factory, tmp_path, session.id)
    assert stored_form(final.events) == stored_form(resumed.events)
    assert check_log(final.events) == []


async def test_unknown_event_types_survive_storage(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:
    session = new_session()
    await store.create(session.header)
    session.append("turn/start", TurnStart(turn=1))
    plugin_event = {
        "type": "goal/set",
        "seq": 1,
        "time": 9,
        "data": {"goalId": "g1"},
        "ignorable": True,
    }
    events = [*session.events, parse_event(plugin_event)]
    await store.append(session.id, events)
    loaded = await fresh_load(factory, tmp_path, session.id)
    assert isinstance(loaded.events[1].data, OpaqueData)
    assert loaded.events[1].to_dict() == plugin_event


async def test_list_exists_and_delete(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:
    sessions = [new_session(cwd=f"/project/{n}") for n in range(3)]
    for session in sessions:
        await store.create(session.header)
        complete_turn(session, "hi", "hello", with_tool=False)
        await store.append(session.id, session.events)
    assert {h.id for h in await store.list()} == {s.id for s in sessions}
    assert await store.delete(sessions[0].id)
    assert not await store.delete(sessions[0].id)
    assert not await store.exists(sessions[0].id)
    with pytest.raises(SessionNotFoundError):
        await fresh_load(factory, tmp_path, sessions[0].id)
    assert {h.id for h in await store.list()} == {s.id for s in sessions[1:]}


async def test_sessions_move_between_backends_unchanged(tmp_path: Path) -> None:
    session = new_session()
    complete_turn(session, "portable?", "yes", with_tool=True)
    for source_factory, target_factory in [
        (JsonlPersistence, SqlitePersistence),
        (SqlitePersistence, JsonlPersistence),
    ]:
        home = tmp_path / f"{source_factory.name}-to-{target_factory.name}"
        source = source_factory(home / "a")
        await source.create(session.header)
        await source.append(session.id, session.events)
        exported = export_jsonl(session.header, (await source.inspect(session.id)).events)
        await source.close()

        imported, _ = parse_jsonl(exported.encode(), "export.jsonl")
        target = target_factory(home / "b")
        await target.create(imported.header)
        await target.append(imported.header.id, imported.events)
        await target.close()
        assert stored_form(
            (await fresh_load(target_factory, home / "b", session.id)).events
        ) == stored_form(session.events)


@pytest.mark.usefixtures("bundled_vocabulary")
async def test_lone_surrogates_in_the_header_and_events_round_trip(
    store: SessionPersistence, factory: Factory, tmp_path: Path
) -> None:
    # A folder whose name is not UTF-8 reads as lone surrogates (os.fsdecode), and a
    # provider may cut an emoji in half: both are stored, and load back the same.
    header = SessionHeader(
        id=new_session_id(),
        created_at=1,
        cwd="/work/caf\udce9",
        model="m\ud83d",
        agent_preset="preset \udcff",
    )
    session = Session(header)
    complete_turn(session, "half an emoji: \ud83d", "the other half: \ude00", with_tool=True)
    session.append("session/title", SessionTitle(title="caf\udce9 \ud83d", source="user"))
    await store.create(session.header)
    await store.append(session.id, session.events)
    loaded = await fresh_load(factory, tmp_path, session.id)
    assert loaded.header == header
    assert loaded.issues == []
    assert stored_form(loaded.events) == stored_form(session.events)
    other = factory(tmp_path)
    try:
        assert await other.list() == [header]
    finally:
        await other.close()


async def test_a_foreign_format_version_is_refused(factory: Factory, tmp_path: Path) -> None:  # P7
    session = new_session()
    backend = factory(tmp_path)
    await backend.create(session.header.model_copy(update={"version": 7}))
    session.append("turn/start", TurnStart(turn=1))
    await backend.append(session.id, session.events)
    await backend.close()
    with pytest.raises(FormatUnsupportedError, match="version 7"):
        await fresh_load(factory, tmp_path, session.id)


async def test_files_are_private(store: SessionPersistence, tmp_path: Path) -> None:
    session = new_session()
    await store.create(session.header)
    session.append("turn/start", TurnStart(turn=1))
    await store.append(session.id, session.events)
    for path in tmp_path.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, f"{path} is {oct(mode)}"
        elif path.suffix in (".jsonl", ".sqlite"):
            assert mode == 0o600, f"{path} is {oct(mode)}"


# ---------------------------------------------------------------------- damaged files (JSONL)


async def stored_jsonl(tmp_path: Path) -> tuple[Session, Path]:
    backend = JsonlPersistence(tmp_path)
    session = new_session()
    await backend.create(session.header)
    complete_turn(session, "first", "the first answer")
    complete_turn(session, "second", "the second answer", with_tool=False)
    await backend.append(session.id, session.events)
    path = Path(str(backend.location(session.id)))
    await backend.close()
    return session, path


async def test_a_torn_last_line_is_dropped_reported_and_cut(tmp_path: Path) -> None:
    session, path = await stored_jsonl(tmp_path)
    sound = await asyncio.to_thread(path.read_bytes)
    path.write_bytes(sound + b'{"type":"turn/start","seq":')  # a write cut by a crash
    backend = JsonlPersistence(tmp_path)
    loaded = await backend.load(session.id)
    assert stored_form(loaded.events) == stored_form(session.events)
    [issue] = loaded.issues
    assert issue.kind == "torn-tail"
    assert issue.line == len(sound.splitlines()) + 1
    assert path.read_bytes() == sound  # cut durably by load

    # The next append continues cleanly after the cut.
    resumed = Session(loaded.header, loaded.events)
    complete_turn(resumed, "third", "three", with_tool=False)
    await backend.append(session.id, resumed.events[len(loaded.events) :])
    await backend.close()
    final = await fresh_load(JsonlPersistence, tmp_path, session.id)
    assert final.issues == []
    assert stored_form(final.events) == stored_form(resumed.events)


async def test_a_complete_but_garbled_last_line_is_treated_as_torn(tmp_path: Path) -> None:
    session, path = await stored_jsonl(tmp_path)
    with path.open("ab") as handle:
        handle.write(b"\x00\x00\x00garbage\n")
    loaded = await fresh_load(JsonlPersistence, tmp_path, session.id)
    assert [i.kind for i in loaded.issues] == ["torn-tail"]
    assert len(loaded.events) == len(session.events)


async def test_a_corrupt_line_in_the_middle_is_reported_and_skipped(tmp_path: Path) -> None:
    session, path = await stored_jsonl(tmp_path)
    lines = path.read_bytes().split(b"\n")
    victim = next(
        i for i, line in enumerate(lines) if b'"type":"user/message"' in line and b"second" in line
    )
    lost_seq = json.loads(lines[victim])["seq"]
    lines[victim] = lines[victim][:20] + b"#corrupted#"
    path.write_bytes(b"\n".join(lines))

    loaded = await fresh_load(JsonlPersistence, tmp_path, session.id)
    [issue] = loaded.issues
    assert issue.kind == "corrupt-line"
    assert issue.line == victim + 1
    assert str(issue).startswith(f"{path}:{victim + 1}: ")
    # Seq numbers stay whole: a placeholder stands where the lost event was.
    assert [e.seq for e in loaded.events] == list(range(len(session.events)))
    placeholder = loaded.events[lost_seq]
    assert placeholder.type == "session/corrupt"
    assert placeholder.data.line == victim + 1
    others = [e for e in loaded.events if e.seq != lost_seq]
    assert stored_form(others) == stored_form([e for e in session.events if e.seq != lost_seq])
    history = Session(loaded.header, loaded.events).derive_messages()
    assert "second" not in [m.text() for m in history]
    assert len(history) == len(session.derive_messages()) - 1


async def test_a_corrupt_packed_run_keeps_seq_numbers_whole(tmp_path: Path) -> None:
    session, path = await stored_jsonl(tmp_path)
    lines = path.read_bytes().split(b"\n")
    victim = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"text-chunks"'))
    run = json.loads(lines[victim])
    lines[victim] = lines[victim].replace(b'"texts":[', b'"texts":[1,')
    path.write_bytes(b"\n".join(lines))
    loaded = await fresh_load(JsonlPersistence, tmp_path, session.id)
    assert [e.seq for e in loaded.events] == list(range(len(session.events)))
    lost = [e.seq for e in loaded.events if e.type == "session/corrupt"]
    assert lost == list(range(run["seq0"], run["seq0"] + len(run["data"]["texts"])))
    assert loaded.issues[0].line == victim + 1


async def test_a_damaged_header_costs_only_what_it_held(tmp_path: Path) -> None:
    session, path = await stored_jsonl(tmp_path)
    data = path.read_bytes()
    path.write_bytes(b"{not json" + data[data.index(b"\n") :])
    loaded = await fresh_load(JsonlPersistence, tmp_path, session.id)
    [issue] = loaded.issues
    assert issue.kind == "corrupt-header"
    assert ":1" in issue.location
    assert "unreadable header" in issue.detail
    # The id is the folder's, the creation time the first event's; every event is there.
    assert loaded.header.id == session.id
    assert loaded.header.created_at == session.events[0].time
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in session.events]


async def test_an_export_without_a_legible_header_is_a_clear_error() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    data = export_jsonl(session.header, session.events).encode()
    with pytest.raises(CorruptSessionError, match=":1: unreadable header"):
        parse_jsonl(b"{not json" + data[data.index(b"\n") :], "export.jsonl")


async def test_delta_runs_are_packed_on_disk(tmp_path: Path) -> None:
    session, path = await stored_jsonl(tmp_path)
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    kinds = {record["type"] for record in records}
    assert {"text-chunks", "reasoning-chunks", "tool-call-chunks"} <= kinds
    # Every text and reasoning answer here is three words or more: none stays unpacked.
    loose = [
        r
        for r in records
        if r["type"] == "assistant/chunk"
        and r["data"]["chunk"]["type"] in ("text-delta", "reasoning-delta")
    ]
    assert loose == []
    assert len(records) < len(session.events)


async def test_a_corrupt_sqlite_row_is_reported_and_skipped(tmp_path: Path) -> None:
    backend = SqlitePersistence(tmp_path)
    session = new_session()
    await backend.create(session.header)
    complete_turn(session, "first", "one", with_tool=False)
    await backend.append(session.id, session.events)
    await backend.close()
    with sqlite3.connect(tmp_path / "sessions.sqlite") as db:
        db.execute("UPDATE events SET data = '{broken' WHERE seq = 1")
    loaded = await fresh_load(SqlitePersistence, tmp_path, session.id)
    [issue] = loaded.issues
    assert issue.kind == "corrupt-line"
    assert issue.line == 2  # the second row (seq 1)
    assert loaded.events[1].type == "session/corrupt"
    assert len(loaded.events) == len(session.events)


def test_dumps_refuses_nan() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps({"x": float("nan")})


async def test_a_file_cut_at_any_byte_loads_as_a_sound_prefix(tmp_path: Path) -> None:
    """What a power cut can leave: the file ends at an arbitrary byte."""
    session, path = await stored_jsonl(tmp_path / "original")
    whole = path.read_bytes()
    header_end = whole.index(b"\n") + 1
    original = stored_form(session.events)
    for cut in range(header_end, len(whole) + 1, max(1, len(whole) // 150)):
        home = tmp_path / f"cut-{cut}"
        copy = home / path.relative_to(tmp_path / "original")
        copy.parent.mkdir(parents=True)
        copy.write_bytes(whole[:cut])
        backend = JsonlPersistence(home)
        loaded = await backend.load(session.id)
        kept = len(loaded.events) - len(loaded.repaired)
        assert stored_form(loaded.events[:kept]) == original[:kept], f"cut at byte {cut}"
        assert {i.kind for i in loaded.issues} <= {"torn-tail", "interrupted-turn"}, cut
        assert check_log(loaded.events) == [], f"cut at byte {cut}"
        resumed = Session(loaded.header, loaded.events)
        complete_turn(resumed, "after the cut", "fine", with_tool=False)
        await backend.append(session.id, resumed.events[len(loaded.events) :])
        await backend.close()
        again = await fresh_load(JsonlPersistence, home, session.id)
        assert again.issues == [], f"cut at byte {cut}: {again.issues}"
        assert check_log(again.events) == [], f"cut at byte {cut}"
