from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.llm import (
    AssistantMessage,
    CallId,
    LlmCallConfig,
    Message,
    PluginSource,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    new_session_id,
    tool_result,
    user_text,
)
from dsh.session import (
    AssistantMessageData,
    EpochHeader,
    EventFormatError,
    ReentrantAppendError,
    ReplaceOp,
    RequestHeader,
    Session,
    SessionEvent,
    SessionHeader,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnInterrupted,
    TurnStart,
    check_log,
)
from dsh.session.history import UNANSWERED_CALL_TEXT
from tests.session.turns import MODEL, answer_calls, complete_turn, stream_step


def new_session(seed: list[SessionEvent] | None = None) -> Session:
    ticks = itertools.count(1_000)
    header = SessionHeader(id=new_session_id(), created_at=1, cwd="/work")
    return Session(header, seed or [], clock=lambda: next(ticks))


def texts(messages: list[Message]) -> list[str]:
    out = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            out.append(f"result:{message.result.tool_call_id}")
        elif isinstance(message, AssistantMessage) and message.tool_calls:
            out.append(f"{message.role}:{message.text().strip()}+{len(message.tool_calls)} call(s)")
        else:
            out.append(f"{message.role}:{message.text().strip()}")
    return out


# ---------------------------------------------------------------------- appending


def test_append_stamps_seq_and_time_in_order() -> None:  # S1
    session = new_session()
    complete_turn(session, "read app.py", "It defines the CLI.")
    assert [e.seq for e in session.events] == list(range(len(session.events)))
    assert [e.time for e in session.events] == sorted(e.time for e in session.events)
    assert check_log(session.events) == []


@pytest.mark.parametrize(
    "meta",
    [{"ratio": math.nan}, {"size": math.inf}, {"by_line": {1: "x"}}, [{"deep": [-math.inf]}]],
    ids=["nan", "inf", "int-key", "nested"],
)
def test_data_that_json_cannot_carry_is_refused_and_changes_nothing(meta: object) -> None:  # S2
    session = new_session()
    seen: list[SessionEvent] = []
    session.subscribe(seen.append)
    result = ToolResult(turn=1, step=1, message=tool_result(CallId("c"), "x"), meta=meta)
    with pytest.raises(EventFormatError, match=r"JSON cannot represent|non-string key"):
        session.append("tool/result", result)
    assert session.events == []
    assert seen == []
    # The same result with JSON-safe meta is accepted.
    safe = result.model_copy(update={"meta": {"ratio": 0.5, "lines": ["a"]}})
    assert session.append("tool/result", safe).seq == 0


def test_free_form_parts_of_an_answer_are_checked_too() -> None:  # S2
    from dsh.llm import AssistantMessage, ModelSource, TextBlock

    session = new_session()
    source = ModelSource(provider="p", model="m", replay_state={"t": math.nan})
    answer = AssistantMessage(content=(TextBlock(text="hi"),), source=source)
    with pytest.raises(EventFormatError, match="JSON cannot represent"):
        session.append("assistant/message", AssistantMessageData(turn=1, step=1, message=answer))
    assert session.events == []


def test_surface_metadata_only_on_surface_events() -> None:  # S3
    session = new_session()
    with pytest.raises(EventFormatError, match="not a surface event"):
        session.append("turn/start", TurnStart(turn=1), surface_op="append")
    with pytest.raises(EventFormatError, match="not a surface event"):
        session.append("turn/start", TurnStart(turn=1), source_event_seqs=[0])
    user = session.append("user/message", user_text("hi"))
    assert user.surface_op == "append"  # surface events default to append
    with pytest.raises(EventFormatError, match="unique earlier"):
        session.append("user/message", user_text("x"), source_event_seqs=[0, 0])
    with pytest.raises(EventFormatError, match="unique earlier"):
        session.append("user/message", user_text("x"), source_event_seqs=[5])
    with pytest.raises(EventFormatError, match="only for assistant/message"):
        session.append("user/message", user_text("x"), source_event_seqs=[])
    empty = AssistantMessage(content=(), source=MODEL)
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    session.append(
        "assistant/message",
        AssistantMessageData(turn=1, step=1, message=empty),
        source_event_seqs=[],
    )
    assert len(session.events) == 4


def test_a_payload_of_the_wrong_model_is_refused() -> None:
    session = new_session()
    with pytest.raises(EventFormatError, match="needs a TurnStart payload"):
        session.append("turn/start", StepStart(turn=1, step=1))
    with pytest.raises(EventFormatError, match="bad turn/start payload"):
        session.append("turn/start", {"turn": "first"})


def test_compaction_replace_shadows_a_run_of_nodes() -> None:  # S4, derive
    session = new_session()
    complete_turn(session, "first question", "first answer", with_tool=False)
    complete_turn(session, "second question", "second answer")
    nodes = session.surface_nodes
    start, end = nodes[0], nodes[-1]
    summary = user_text(
        "<compacted-summary>two questions answered</compacted-summary>",
        source=PluginSource(plugin="compact", form="notice"),
    )
    with pytest.raises(EventFormatError, match="cite every node"):
        session.append(
            "user/message",
            summary,
            surface_op=ReplaceOp(start=start, end=end),
            source_event_seqs=[start],
        )
    with pytest.raises(EventFormatError, match="start comes after end"):
        session.append(
            "user/message",
            summary,
            surface_op=ReplaceOp(start=end, end=start),
            source_event_seqs=list(nodes),
        )
    with pytest.raises(EventFormatError, match="not on the surface"):
        session.append(
            "user/message",
            summary,
            surface_op=ReplaceOp(start=0, end=end),
            source_event_seqs=[0, end],
        )
    generation = session.replace_generation
    replaced = session.append(
        "user/message",
        summary,
        surface_op=ReplaceOp(start=start, end=end),
        source_event_seqs=list(nodes),
    )
    assert session.surface_nodes == (replaced.seq,)
    assert session.replace_generation == generation + 1
    assert texts(session.derive_messages()) == [
        "user:<compacted-summary>two questions answered</compacted-summary>"
    ]
    complete_turn(session, "third", "third answer", with_tool=False)
    assert texts(session.derive_messages())[1:] == ["user:third", "assistant:third answer"]
    assert check_log(session.events) == []


def test_derive_messages_projects_the_surface() -> None:
    session = new_session()
    complete_turn(session, "read app.py", "It defines the CLI.")
    session.append("turn/start", TurnStart(turn=2))
    session.append("user/message", user_text("and tests?"))
    session.append("step/start", StepStart(turn=2, step=1))
    session.append("steering/message", user_text("only unit tests"))
    stream_step(session, 2, 1, text="Partial answ")  # an interrupted, user-visible answer
    assert texts(session.derive_messages()) == [
        "user:read app.py",
        "assistant:Let me read it.+1 call(s)",
        "result:call_1_a",
        "assistant:It defines the CLI.",
        "user:and tests?",
        "user:only unit tests",
        "assistant:Partial answ",
    ]
    # Chunks and empty answers never reach history.
    assert not any(m.role == "assistant" and not m.content for m in session.derive_messages())


def test_an_unanswered_tool_call_gets_a_stable_synthetic_error_result() -> None:
    session = new_session()
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", user_text("run it"))
    session.append("step/start", StepStart(turn=1, step=1))
    message = stream_step(
        session, 1, 1, calls=[("a", "bash", {"command": "make"}), ("b", "read", {"path": "x"})]
    )
    first_call = message.tool_calls[0]
    started = session.append(
        "tool/call", ToolCall(turn=1, step=1, call_id=first_call.id, name="bash", arguments="{}")
    )
    session.append(
        "tool/result",
        ToolResult(turn=1, step=1, message=tool_result(CallId("a"), "ok")),
        source_event_seqs=[started.seq],
    )
    history = session.derive_messages()
    assert texts(history)[-2:] == ["result:a", "result:b"]
    synthetic = history[-1]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.result.is_error is True
    assert synthetic.result.content == (TextBlock(text=UNANSWERED_CALL_TEXT),)
    # Deterministic: a fresh session derived from the same log agrees exactly.
    assert new_session(list(session.events)).derive_messages() == history


def test_cached_history_equals_a_fresh_fold() -> None:  # S5
    session = new_session()
    assert session.derive_messages() == []
    complete_turn(session, "one", "uno")
    after_one = list(session.events)
    cached = session.derive_messages()
    complete_turn(session, "two", "dos", with_tool=False)
    assert cached == new_session(after_one).derive_messages()
    assert session.derive_messages() == new_session(list(session.events)).derive_messages()
    assert session.derive_messages()[: len(cached)] == cached


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.booleans()), min_size=1, max_size=6))
def test_history_from_any_turn_sequence_is_provider_valid(turns: list[tuple[str, bool]]) -> None:
    session = new_session()
    for prompt, with_tool in turns:
        complete_turn(session, prompt, "ok", with_tool=with_tool)
        session.derive_messages()  # exercise the cache between appends
    history = session.derive_messages()
    assert history == new_session(list(session.events)).derive_messages()
    assert check_log(session.events) == []
    # Every tool call is answered right after its message, before anything else.
    for index, message in enumerate(history):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answers = history[index + 1 : index + 1 + len(message.tool_calls)]
            assert [a.result.tool_call_id for a in answers] == [c.id for c in message.tool_calls]  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- subscribers


def test_subscribers_see_every_event_once_in_order_and_late_ones_replay() -> None:
    session = new_session()
    early: list[int] = []
    session.subscribe(lambda e: early.append(e.seq))
    complete_turn(session, "a", "b", with_tool=False)
    late: list[int] = []
    unsubscribe = session.subscribe(lambda e: late.append(e.seq), from_seq=3)
    complete_turn(session, "c", "d", with_tool=False)
    unsubscribe()
    session.append("turn/start", TurnStart(turn=3))
    assert early == list(range(len(session.events)))
    assert late == list(range(3, len(session.events) - 1))


def test_a_failing_subscriber_is_contained() -> None:
    session = new_session()
    seen: list[int] = []

    def broken(event: SessionEvent) -> None:
        raise RuntimeError("renderer crashed")

    session.subscribe(broken)
    session.subscribe(lambda e: seen.append(e.seq))
    session.append("turn/start", TurnStart(turn=1))
    assert seen == [0]


def test_appending_from_a_subscriber_raises() -> None:
    session = new_session()
    errors: list[BaseException] = []

    def reenter(event: SessionEvent) -> None:
        try:
            session.append("step/start", StepStart(turn=1, step=1))
        except ReentrantAppendError as error:
            errors.append(error)

    session.subscribe(reenter)
    session.append("turn/start", TurnStart(turn=1))
    assert len(errors) == 1
    assert len(session.events) == 1


# ---------------------------------------------------------------------- seeds and headers


def test_a_seeded_session_marks_where_the_seed_ends_once() -> None:  # S13
    fresh = new_session()
    complete_turn(fresh, "hi", "hello", with_tool=False)
    assert not any(e.type == "session/end-seed" for e in fresh.events)

    reopened = new_session(list(fresh.events))
    assert reopened.first_live_seq == len(fresh.events)
    assert reopened.events[-1].type == "session/end-seed"
    assert reopened.last_turn == 1

    untouched = new_session(list(reopened.events))
    assert len(untouched.events) == len(reopened.events)  # no second marker
    assert untouched.derive_messages() == fresh.derive_messages()


def test_a_seed_must_be_numbered_from_zero() -> None:
    fresh = new_session()
    complete_turn(fresh, "hi", "hello", with_tool=False)
    with pytest.raises(EventFormatError, match="seed event 0 has seq 1"):
        new_session(list(fresh.events[1:]))


def test_request_header_is_the_latest_one() -> None:
    session = new_session()
    assert session.request_header() is None
    for model in ("deepseek-v4-flash", "deepseek-v4-pro"):
        header = EpochHeader(config=LlmCallConfig(provider="deepseek", model=model), system="s")
        session.append("request/header", RequestHeader(header=header, reason="initial"))
    header = session.request_header()
    assert header is not None
    assert header.config.model == "deepseek-v4-pro"


def test_check_log_reports_broken_structure() -> None:
    session = new_session()
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    message = AssistantMessage(
        content=(ToolCallBlock(id=CallId("x"), name="bash", arguments="{}"),), source=MODEL
    )
    session.append(
        "assistant/message",
        AssistantMessageData(turn=1, step=1, message=message),
        source_event_seqs=[],
    )
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/start", TurnStart(turn=3))
    problems = check_log(session.events)
    assert any(p.startswith("S8: call x") for p in problems)
    assert any("opens turn 3 while 1 is open" in p for p in problems)
    assert any("opens turn 3 after turn 1" in p for p in problems)


def test_check_log_accepts_a_crash_closed_turn() -> None:
    session = new_session()
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", user_text("x"))
    session.append("step/start", StepStart(turn=1, step=1))
    message = stream_step(session, 1, 1, calls=[("a", "read", {})])
    answer_calls(session, 1, 1, message)
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason=TurnInterrupted()))
    assert check_log(session.events) == []
