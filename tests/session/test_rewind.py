"""Rewinding the conversation: ``history/rewound`` shadows the turns from the one it
names on, the log stays append-only, and history, live or loaded, is what it was
before that turn."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.llm import LlmCallConfig, PluginSource, new_session_id, user_text
from dsh.session import (
    EpochHeader,
    EventFormatError,
    ForkError,
    ReplaceOp,
    RequestContext,
    RequestHeader,
    Session,
    SessionEvent,
    SessionHeader,
    SessionStore,
    StepStart,
    TurnCompleted,
    TurnEnd,
    TurnStart,
    check_log,
)
from dsh.session.payloads import HistoryRewound
from dsh.session.turns import TurnNotFoundError, find_turn, turn_prompt, turns, turns_of
from tests.session.turns import complete_turn


def new_session(seed: list[SessionEvent] | None = None) -> Session:
    ticks = itertools.count(1_000)
    header = SessionHeader(id=new_session_id(), created_at=1, cwd="/work")
    return Session(header, seed or [], clock=lambda: next(ticks))


def texts(session: Session) -> list[str]:
    return [message.text().strip() for message in session.derive_messages()]


def start_of(session: Session, turn: int) -> int:
    return find_turn(turns(session), turn).start_seq


def rewind(session: Session, turn: int) -> SessionEvent:
    return session.append(
        "history/rewound", HistoryRewound(turn=turn, to_seq=start_of(session, turn))
    )


def summarise(session: Session, text: str) -> None:
    """What the compaction plugin does: one message in place of every node so far."""
    nodes = session.surface_nodes
    session.append(
        "user/message",
        user_text(text, source=PluginSource(plugin="compact", form="notice")),
        surface_op=ReplaceOp(start=nodes[0], end=nodes[-1]),
        source_event_seqs=list(nodes),
    )


def test_rewinding_to_a_turn_gives_back_the_history_from_before_it() -> None:
    session = new_session()
    complete_turn(session, "first", "one")
    before_second = session.derive_messages()
    complete_turn(session, "second", "two")
    complete_turn(session, "third", "three", with_tool=False)
    generation = session.replace_generation
    length = len(session.events)

    rewound = rewind(session, 2)

    assert session.derive_messages() == before_second
    assert session.replace_generation == generation + 1
    assert len(session.events) == length + 1  # only appended
    start = start_of(session, 2)
    assert [session.shadowed(seq) for seq in (start - 1, start, rewound.seq - 1, rewound.seq)] == [
        False,
        True,
        True,
        False,
    ]
    assert [(t.turn, t.prompt, t.shadowed) for t in turns(session)] == [
        (1, "first", False),
        (2, "second", True),
        (3, "third", True),
    ]
    # The next turn's number is not one of the rewound ones.
    complete_turn(session, "second, again", "two again", with_tool=False)
    assert session.last_turn == 4
    assert texts(session)[-2:] == ["second, again", "two again"]
    assert check_log(session.events) == []


def test_a_rewind_is_refused_with_the_reason_and_changes_nothing() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    complete_turn(session, "second", "two", with_tool=False)
    length, messages = len(session.events), session.derive_messages()
    start = start_of(session, 2)
    with pytest.raises(EventFormatError, match="not that turn's turn/start"):
        session.append("history/rewound", HistoryRewound(turn=1, to_seq=start))
    with pytest.raises(EventFormatError, match="not before it"):
        session.append("history/rewound", HistoryRewound(turn=2, to_seq=length + 5))
    rewind(session, 2)
    with pytest.raises(EventFormatError, match="took back already"):
        session.append("history/rewound", HistoryRewound(turn=2, to_seq=start))
    session.append("turn/start", TurnStart(turn=3))
    session.append("step/start", StepStart(turn=3, step=1))
    with pytest.raises(EventFormatError, match="while turn 3 is open"):
        rewind(session, 1)
    assert len(session.events) == length + 3
    assert session.derive_messages() == messages[:2]


def test_rewinds_nest_and_a_later_one_can_reach_past_an_earlier_one() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    complete_turn(session, "second", "two", with_tool=False)
    complete_turn(session, "third", "three", with_tool=False)
    rewind(session, 3)
    complete_turn(session, "fourth", "four", with_tool=False)
    assert texts(session) == ["first", "one", "second", "two", "fourth", "four"]
    rewind(session, 4)
    assert texts(session) == ["first", "one", "second", "two"]
    complete_turn(session, "fifth", "five", with_tool=False)
    rewind(session, 2)
    assert texts(session) == ["first", "one"]
    assert [t.turn for t in turns(session) if not t.shadowed] == [1]
    with pytest.raises(TurnNotFoundError, match="rewound already; the only turn is 1"):
        find_turn(turns(session), 5, visible=True)
    with pytest.raises(TurnNotFoundError, match="there is no turn 9"):
        find_turn(turns(session), 9)
    complete_turn(session, "sixth", "six", with_tool=False)
    assert texts(session) == ["first", "one", "sixth", "six"]
    # Loaded from the log alone, it is the same.
    assert new_session(list(session.events)).derive_messages() == session.derive_messages()
    assert turns_of(session.events) == turns(session)


def test_a_turn_before_a_compaction_can_be_rewound() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    complete_turn(session, "second", "two")
    summarise(session, "summary of one and two")
    complete_turn(session, "third", "three", with_tool=False)
    assert texts(session) == ["summary of one and two", "third", "three"]

    rewind(session, 3)  # the compaction came before turn 3: it stays
    assert texts(session) == ["summary of one and two"]
    complete_turn(session, "fourth", "four", with_tool=False)
    rewind(session, 2)  # before the compaction: the turns it summarised come back
    assert texts(session) == ["first", "one"]
    assert new_session(list(session.events)).derive_messages() == session.derive_messages()


def test_a_compaction_inside_the_rewound_turns_is_undone_with_them() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    before = session.derive_messages()
    session.append("turn/start", TurnStart(turn=2))
    session.append("user/message", user_text("second"))
    summarise(session, "summary, during turn 2")  # automatic compaction, mid-turn
    complete_turn_end(session, 2)
    assert texts(session) == ["summary, during turn 2"]
    rewind(session, 2)
    assert session.derive_messages() == before


def complete_turn_end(session: Session, turn: int) -> None:
    session.append("turn/end", TurnEnd(turn=turn, reason=TurnCompleted()))


def test_the_request_header_and_route_are_not_rewound() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    session.append("turn/start", TurnStart(turn=2))
    config = LlmCallConfig(provider="deepseek", model="deepseek-v4-pro")
    header = EpochHeader(config=config, system="be brief")
    logged = session.append("request/header", RequestHeader(header=header, reason="initial"))
    session.append("request/context", RequestContext(provider="deepseek", model="deepseek-v4-pro"))
    session.append("user/message", user_text("second"))
    complete_turn_end(session, 2)
    rewind(session, 2)
    # What the next request is sent with does not change with the conversation.
    assert session.request_header_seq == logged.seq
    assert session.request_header() == header
    context = session.request_context()
    assert context is not None
    assert context.model == "deepseek-v4-pro"


def test_a_rewind_whose_turn_start_is_lost_is_ignored_when_loaded() -> None:
    session = new_session()
    complete_turn(session, "first", "one", with_tool=False)
    complete_turn(session, "second", "two", with_tool=False)
    rewound = rewind(session, 2)
    events = list(session.events)
    # A hand-edited log: the rewind names turn 2 at a seq that is not its start.
    broken = SessionEvent(
        type=rewound.type,
        seq=rewound.seq,
        time=rewound.time,
        data=HistoryRewound(turn=2, to_seq=start_of(session, 2) + 1),
    )
    events[rewound.seq] = broken
    loaded = new_session(events)
    assert texts(loaded) == ["first", "one", "second", "two"]
    assert not any(t.shadowed for t in turns(loaded))


def test_the_rewound_prompt_is_the_persons_message_not_context() -> None:
    session = new_session()
    session.append("turn/start", TurnStart(turn=1))
    session.append(
        "user/message", user_text("AGENTS.md says...", source=PluginSource(plugin="agents-md"))
    )
    session.append("user/message", user_text("fix the bug"))
    complete_turn_end(session, 1)
    [info] = turns(session)
    assert info.prompt == "fix the bug"
    prompt = turn_prompt(session.events, info)
    assert prompt is not None
    assert prompt.text() == "fix the bug"


@pytest.fixture(params=["jsonl", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened = SessionStore.at(tmp_path, request.param)
    yield opened
    await opened.aclose()


def reopen(store: SessionStore, home: Path) -> SessionStore:
    if store.locks is not None:
        store.locks.release_all()
    return SessionStore.at(home, store.persistence.name)  # type: ignore[arg-type]


async def test_a_stored_rewind_loads_the_same_from_either_backend(
    store: SessionStore, tmp_path: Path
) -> None:
    session = await store.create("/w")
    complete_turn(session, "first", "one")
    complete_turn(session, "second", "two")
    summarise(session, "summary")
    complete_turn(session, "third", "three", with_tool=False)
    rewind(session, 2)
    complete_turn(session, "second, again", "two again", with_tool=False)
    # A crash in the middle of the next turn: repair closes it, the rewind still holds.
    session.append("turn/start", TurnStart(turn=5))
    session.append("user/message", user_text("cut short"))
    assert await store.flush(session)
    live = session.derive_messages()

    other = reopen(store, tmp_path)
    try:
        loaded = await other.open(session.id)
        assert [i.kind for i in loaded.load_issues] == ["interrupted-turn"]
        assert loaded.derive_messages()[: len(live)] == live
        assert texts(loaded)[3:7] == ["one", "second, again", "two again", "cut short"]
        assert [t.shadowed for t in turns(loaded)] == [False, True, True, False, False]
        assert loaded.last_turn == 5
        assert check_log(loaded.events) == []
    finally:
        await other.aclose()


async def test_a_fork_at_a_turn_holds_the_conversation_through_its_end(
    store: SessionStore, tmp_path: Path
) -> None:
    source = await store.create("/w")
    complete_turn(source, "first", "one", with_tool=False)
    complete_turn(source, "second", "two", with_tool=False)
    complete_turn(source, "third", "three", with_tool=False)
    rewind(source, 3)
    complete_turn(source, "fourth", "four", with_tool=False)
    await store.close(source)

    at_two = await store.fork(source.id[:8], at_turn=2)
    assert texts(at_two) == ["first", "one", "second", "two"]
    assert at_two.header.parent_session == source.id
    # A rewound turn can be forked at: its branch comes back as it was.
    at_three = await store.fork(source.id, at_turn=3)
    assert texts(at_three) == ["first", "one", "second", "two", "third", "three"]
    at_four = await store.fork(source.id, at_turn=4)
    assert texts(at_four) == ["first", "one", "second", "two", "fourth", "four"]
    complete_turn(at_four, "fifth", "five", with_tool=False)
    assert at_four.last_turn == 5
    assert check_log(at_four.events) == []
    with pytest.raises(ForkError, match="there is no turn 9; the turns are 1-4"):
        await store.fork(source.id, at_turn=9)
    for fork in (at_two, at_three, at_four):
        await store.close(fork)

    other = reopen(store, tmp_path)
    try:
        reread = await other.open(at_four.id)
        assert texts(reread) == ["first", "one", "second", "two", "fourth", "four", "fifth", "five"]
    finally:
        await other.aclose()


async def test_a_fork_at_a_turn_that_has_not_ended_is_refused(
    store: SessionStore, tmp_path: Path
) -> None:
    source = await store.create("/w")
    complete_turn(source, "first", "one", with_tool=False)
    source.append("turn/start", TurnStart(turn=2))
    source.append("user/message", user_text("still going"))
    assert await store.flush(source)
    # Another process forks it while its writer holds it: the open turn is
    # unfinished, not interrupted.
    other = SessionStore.at(tmp_path, store.persistence.name)  # type: ignore[arg-type]
    try:
        with pytest.raises(ForkError, match=r"turn 2 of session .* has not ended yet"):
            await other.fork(source.id, at_turn=2)
        fork = await other.fork(source.id, at_turn=1)
        assert texts(fork) == ["first", "one"]
    finally:
        await other.aclose()
