from __future__ import annotations

import json
from typing import Any

import pytest

from dsh.llm import (
    CallId,
    LlmCallConfig,
    LlmFailure,
    TokenUsage,
    ToolSchema,
    tool_result,
    user_text,
)
from dsh.session import (
    EpochHeader,
    EventFormatError,
    RequestHeader,
    SessionEvent,
    ToolErrorIdentity,
    ToolResult,
    TurnAborted,
    TurnEnd,
    TurnFailed,
    TurnStart,
    parse_event,
    register_event,
)
from dsh.session.events import EventType, ReplaceOp, register_event_type, registered_event_types
from dsh.session.payloads import CancelByHook, JobTrigger, LlmRetry, OpaqueData
from dsh.wire import Frozen
from dsh_plugins.compaction.events import CompactionSummary
from dsh_plugins.todo import TodoItem, TodoWrite
from tests.support.vocabulary import plugin_vocabulary

SEED_VARIANTS = {
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "steering/message",
    "request/header",
}
SATELLITES = {
    "request/context",
    "session/end-seed",
    "llm/retry",
    "llm/retry-started",
    "approval/requested",
    "approval/resolved",
    "command/run",
    "command/done",
    "inbox/enqueued",
    "inbox/updated",
    "inbox/claimed",
    "inbox/discarded",
}


PLUGIN_TYPES = {
    "todo/write",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "session/title",
    "session/title-llm-request",
}


def test_every_specified_event_type_is_registered() -> None:
    assert set(registered_event_types()) >= SEED_VARIANTS | SATELLITES
    # The bundled plugins' types are theirs: registered while their vocabulary is.
    assert not set(registered_event_types()) & PLUGIN_TYPES
    with plugin_vocabulary("todo", "compaction", "title"):
        assert set(registered_event_types()) >= PLUGIN_TYPES
    assert not set(registered_event_types()) & PLUGIN_TYPES


def round_trip(event: SessionEvent) -> SessionEvent:
    return parse_event(json.loads(json.dumps(event.to_dict())))


@pytest.mark.parametrize(
    ("type_", "data", "extra"),
    [
        ("turn/start", TurnStart(turn=3, trigger=JobTrigger(job_id="j1")), {}),
        ("turn/end", TurnEnd(turn=1, reason=TurnAborted(reason=CancelByHook(reason="policy"))), {}),
        (
            "turn/end",
            TurnEnd(
                turn=2,
                reason=TurnFailed(error=LlmFailure(message="down", code="SERVER", status=503)),
            ),
            {},
        ),
        ("user/message", user_text("hello"), {"surface_op": "append"}),
        (
            "tool/result",
            ToolResult(
                turn=1,
                step=2,
                message=tool_result(CallId("c"), "boom", is_error=True),
                error=ToolErrorIdentity(name="bash", code="TIMEOUT"),
                meta={"diff": "--- a\n+++ b", "lines": [1, 2]},
            ),
            {"surface_op": "append", "source_event_seqs": (4,)},
        ),
        (
            "todo/write",
            TodoWrite(todos=(TodoItem(content="write tests", status="in_progress"),)),
            {},
        ),
        (
            "request/header",
            RequestHeader(
                header=EpochHeader(
                    config=LlmCallConfig(
                        provider="deepseek", model="deepseek-v4-pro", reasoning_effort="max"
                    ),
                    adapter_defaults={"maxTokens": True},
                    system="You are dsh.",
                    tools=(
                        ToolSchema(
                            name="read", description="Read a file", parameters={"type": "object"}
                        ),
                    ),
                ),
                reason="initial",
            ),
            {},
        ),
        (
            "compaction/summary",
            CompactionSummary(
                compaction_id="k1",
                summary="we fixed the bug",
                shadowed_range=(3, 40),
                shadowed_seqs=(3, 9, 40),
                shadowed_token_count=12000,
                provider="deepseek",
                model="deepseek-v4-flash",
                usage=TokenUsage(input_tokens=1, output_tokens=2),
            ),
            {},
        ),
        (
            "llm/retry",
            LlmRetry(
                retry_id="r1",
                turn=1,
                step=1,
                provider="deepseek",
                retry=1,
                max_retries=5,
                delay_ms=500,
                failure=LlmFailure(message="slow down", code="RATE_LIMIT", status=429),
            ),
            {},
        ),
    ],
)
def test_events_round_trip_through_json_exactly(
    type_: str, data: Any, extra: dict[str, Any]
) -> None:
    event = SessionEvent(type_, 5, 1_700_000_000_000, data, **extra)
    with plugin_vocabulary("todo", "compaction"):
        assert round_trip(event) == event
        assert round_trip(round_trip(event)).to_dict() == event.to_dict()
        # The fast writer path says exactly what the dict says, in the same key order.
        expected = json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":"))
        assert event.to_json() == expected
    # Without its plugin, a plugin's event is opaque and written back unchanged.
    assert round_trip(event).to_dict() == event.to_dict()


def test_json_names_are_camel_case() -> None:
    event = SessionEvent(
        "tool/result",
        7,
        1,
        ToolResult(turn=1, step=1, message=tool_result(CallId("c"), "x")),
        surface_op=ReplaceOp(start=2, end=5),
        source_event_seqs=(2, 5),
    )
    stored = event.to_dict()
    assert stored["surfaceOp"] == {"op": "replace", "start": 2, "end": 5}
    assert stored["sourceEventSeqs"] == [2, 5]
    assert stored["data"]["message"]["content"][0]["toolCallId"] == "c"


def test_unknown_event_types_load_opaque_and_write_back_unchanged() -> None:
    stored = {
        "type": "goal/updated",
        "seq": 9,
        "time": 5,
        "data": {"goalId": "g", "nested": {"x": [1, 2]}},
        "ignorable": True,
    }
    event = parse_event(stored)
    assert isinstance(event.data, OpaqueData)
    assert event.to_dict() == stored


def test_plugins_register_their_own_event_types() -> None:
    class Pinned(Frozen):
        note: str

    class Other(Frozen):
        note: int

    unregister = register_event("notes/pinned", Pinned)
    try:
        event = parse_event({"type": "notes/pinned", "seq": 0, "time": 0, "data": {"note": "hi"}})
        assert event.data == Pinned(note="hi")
        with pytest.raises(ValueError, match="already registered"):
            register_event("notes/pinned", Other)
        with pytest.raises(ValueError, match="already registered"):
            register_event("turn/start", Pinned)
        # The same type again (a second runtime in the process) holds it once more:
        # it stays until both registrations are given up.
        again = register_event("notes/pinned", Pinned)
        unregister()
        unregister()  # giving up twice gives up once
        assert isinstance(parse_event(event.to_dict()).data, Pinned)
        again()
    finally:
        unregister()
    assert isinstance(parse_event(event.to_dict()).data, OpaqueData)
    with pytest.raises(ValueError, match="namespaced"):
        register_event("pinned", Pinned)
    with pytest.raises(ValueError, match="only the core's"):  # history is the core's
        register_event_type(EventType("notes/said", Pinned, surface=True))


def test_event_types_declare_the_title_and_the_paid_call_they_carry() -> None:
    from dsh.llm import TokenUsage
    from dsh.session import PaidCall, latest_title, paid_call, title_of

    class Named(Frozen):
        name: str
        tokens: int

    named = EventType(
        "notes/named",
        Named,
        title=lambda data: data.name,
        paid_call=lambda data: PaidCall(
            "p", "m", TokenUsage(input_tokens=data.tokens, output_tokens=1)
        ),
    )
    event = SessionEvent("notes/named", 3, 1_700_000_000_000, Named(name="Fix it", tokens=7))
    unregister = register_event_type(named)
    try:
        assert title_of(event) == "Fix it"
        assert latest_title([event, SessionEvent("turn/start", 4, 0, TurnStart(turn=1))]) == (
            "Fix it"
        )
        call = paid_call(event)
        assert call is not None
        assert (call.provider, call.model, call.usage.input_tokens) == ("p", "m", 7)
    finally:
        unregister()
    opaque = parse_event(event.to_dict())
    assert (title_of(opaque), paid_call(opaque)) == (None, None)  # the plugin is gone


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([1, 2], "must be an object"),
        ({"seq": 0, "time": 0, "data": {}}, "string 'type'"),
        ({"type": "turn/start", "seq": -1, "time": 0, "data": {"turn": 1}}, "'seq'"),
        ({"type": "turn/start", "seq": True, "time": 0, "data": {"turn": 1}}, "'seq'"),
        ({"type": "turn/start", "seq": 0, "time": "now", "data": {"turn": 1}}, "'time'"),
        (
            {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 0}},
            "bad turn/start payload: turn",
        ),
        ({"type": "turn/start", "seq": 0, "time": 0, "data": {}}, "turn: Field required"),
        (
            {"type": "user/message", "seq": 0, "time": 0, "data": {}, "surfaceOp": "move"},
            "bad surfaceOp",
        ),
        (
            {
                "type": "turn/start",
                "seq": 0,
                "time": 0,
                "data": {"turn": 1},
                "sourceEventSeqs": "1",
            },
            "sourceEventSeqs",
        ),
    ],
)
def test_malformed_events_are_clear_errors(raw: Any, message: str) -> None:
    with pytest.raises(EventFormatError, match=message):
        parse_event(raw)
