"""The parts of compaction on their own, over real sessions: where a cut may fall,
which cut is chosen, how the context is measured, what is cut short to fit."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dsh.llm import (
    AssistantMessage,
    CallId,
    ModelSource,
    SessionId,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultMessage,
    joined_text,
    message_tokens,
    text_tokens,
    tool_result,
    user_text,
)
from dsh.session import (
    AssistantMessageData,
    ReplaceOp,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
from dsh_plugins.compaction import Config
from dsh_plugins.compaction.meter import measure
from dsh_plugins.compaction.request import (
    Call,
    build_request,
    fit,
    history,
    instruction,
    summary_message,
)
from dsh_plugins.compaction.selection import choose_cut, valid_cuts

MODEL = ModelSource(provider="deepseek", model="deepseek-v4-flash")


class Log:
    """Turns appended to a real session, the way the loop appends them."""

    def __init__(self) -> None:
        self.session = Session(SessionHeader(id=SessionId("parts"), created_at=0))
        self.turn = 0
        self.calls = 0

    def exchange(
        self,
        prompt: str,
        *,
        tools: list[list[str]] | None = None,
        answer: str = "done",
        usage: int | None = None,
    ) -> None:
        """A turn: the prompt, one step per entry of ``tools`` (each calling tools that
        return those outputs), then the answer (with ``usage`` input tokens)."""
        session = self.session
        self.turn += 1
        turn = self.turn
        session.append("turn/start", TurnStart(turn=turn))
        step = 0
        for step, outputs in enumerate([*(tools or []), []], start=1):
            session.append("step/start", StepStart(turn=turn, step=step))
            if step == 1:
                session.append("user/message", user_text(prompt))
            if outputs:
                ids = []
                for _ in outputs:
                    self.calls += 1
                    ids.append(CallId(f"call-{self.calls}"))
                blocks = tuple(ToolCallBlock(id=i, name="dump", arguments="{}") for i in ids)
                session.append(
                    "assistant/message",
                    AssistantMessageData(
                        turn=turn, step=step, message=AssistantMessage(content=blocks, source=MODEL)
                    ),
                )
                for call_id, output in zip(ids, outputs, strict=True):
                    call = session.append(
                        "tool/call",
                        ToolCall(
                            turn=turn, step=step, call_id=call_id, name="dump", arguments="{}"
                        ),
                    )
                    session.append(
                        "tool/result",
                        ToolResult(turn=turn, step=step, message=tool_result(call_id, output)),
                        source_event_seqs=[call.seq],
                    )
            else:
                message = AssistantMessage(content=(TextBlock(text=answer),), source=MODEL)
                report = TokenUsage(input_tokens=usage, output_tokens=10) if usage else None
                session.append(
                    "assistant/message",
                    AssistantMessageData(turn=turn, step=step, message=message, usage=report),
                )
            session.append("step/end", StepEnd(turn=turn, step=step))
        session.append("turn/end", TurnEnd(turn=turn, reason=TurnCompleted()))

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.session.surface_nodes

    def types(self, seqs: tuple[int, ...]) -> list[str]:
        return [self.session.events[s].type for s in seqs]

    def sizes(self) -> list[int]:
        measured = measure(self.session.events, self.nodes, None)
        return list(measured.estimates)


def test_a_cut_never_separates_calls_from_their_results() -> None:
    log = Log()
    log.exchange("one", tools=[["a", "b"], ["c"]])
    nodes = log.nodes
    # prompt, call(a,b), a, b, call(c), c, answer
    assert log.types(nodes) == [
        "user/message",
        "assistant/message",
        "tool/result",
        "tool/result",
        "assistant/message",
        "tool/result",
        "assistant/message",
    ]
    assert valid_cuts(log.session.events, nodes) == [1, 4, 6]


def test_pressure_keeps_the_recent_turns_that_fit_and_compact_only_the_latest() -> None:
    log = Log()
    for number in range(4):
        log.exchange(f"question {number}", answer="x" * 400)  # ~100 tokens a message
    sizes = log.sizes()
    per_turn = sizes[0] + sizes[1]
    events, nodes = log.session.events, log.nodes

    pressure = choose_cut(events, nodes, sizes, keep=2 * per_turn + 5, mode="pressure")
    assert pressure is not None
    assert pressure.head == nodes[:4]  # two turns summarised, the last two kept
    assert pressure.tail_tokens == 2 * per_turn

    manual = choose_cut(events, nodes, sizes, keep=10 * per_turn, mode="manual")
    assert manual is not None
    assert manual.head == nodes[:6]  # only the latest turn kept

    # Nothing fits the budget: the cut falls inside the latest turn.
    tiny = choose_cut(events, nodes, sizes, keep=1, mode="pressure")
    assert tiny is not None
    assert tiny.head == nodes[:7]


def test_a_long_single_turn_keeps_its_latest_steps() -> None:
    log = Log()
    log.exchange("one long job", tools=[["x" * 4000], ["y" * 4000], ["z" * 4000]])
    events, nodes = log.session.events, log.nodes
    sizes = log.sizes()
    cut = choose_cut(events, nodes, sizes, keep=sum(sizes[-3:]), mode="pressure")
    assert cut is not None
    # The last call and its result and the answer stay; the rest is summarised.
    assert log.types(nodes[len(cut.head) :]) == [
        "assistant/message",
        "tool/result",
        "assistant/message",
    ]
    manual = choose_cut(events, nodes, sizes, keep=10**9, mode="manual")
    assert manual is not None
    assert log.types(nodes[len(manual.head) :]) == ["assistant/message"]


def test_nothing_worth_compacting() -> None:
    log = Log()
    assert choose_cut(log.session.events, (), [], keep=100, mode="manual") is None
    log.exchange("hello")
    sizes = log.sizes()
    # Only the prompt could go: not worth a summary.
    assert choose_cut(log.session.events, log.nodes, sizes, keep=100, mode="manual") is None


def test_the_measure_starts_from_the_latest_report_and_estimates_what_came_after() -> None:
    log = Log()
    log.exchange("first", answer="a" * 400, usage=5_000)
    events, nodes = log.session.events, log.nodes
    estimated = sum(log.sizes())
    plain = measure(events, nodes, None)
    assert plain.reported
    assert plain.total == 5_010  # input and output of the latest call
    assert plain.ratio == pytest.approx(min(4.0, 5_010 / estimated))

    log.session.append("user/message", user_text("b" * 4_000))  # ~1,000 tokens more
    later = measure(log.session.events, log.nodes, None)
    added = message_tokens(user_text("b" * 4_000))
    assert later.total == 5_010 + round(added * later.ratio)


def test_a_report_from_before_a_compaction_is_not_used() -> None:
    log = Log()
    log.exchange("first", answer="a" * 400)
    log.exchange("second", answer="b" * 400, usage=9_000)
    session = log.session
    nodes = session.surface_nodes
    summary = summary_message("c1", "short", ())
    session.append(
        "user/message",
        summary,
        surface_op=ReplaceOp(start=nodes[0], end=nodes[1]),
        source_event_seqs=nodes[:2],
    )
    # The second answer is kept, but its report measured the replaced history too.
    measured = measure(session.events, session.surface_nodes, None)
    assert not measured.reported
    assert measured.total == sum(measured.estimates) < 1_000


def test_fit_cuts_the_oldest_tool_outputs_first_then_leaves_out_the_oldest_messages() -> None:
    log = Log()
    log.exchange("one", tools=[["x" * 40_000]])
    log.exchange("two", tools=[["y" * 40_000]])
    events, head = log.session.events, log.nodes
    results = [s for s in head if events[s].type == "tool/result"]
    everything = sum(log.sizes())

    unlimited = fit(None, events, head, budget=None, ratio=1.0, focus=None, todos=())
    assert unlimited is not None
    assert unlimited.trimmed == ()
    roomy = fit(None, events, head, budget=everything + 1_000, ratio=1.0, focus=None, todos=())
    assert roomy is not None
    assert roomy.trimmed == roomy.omitted == ()

    one = fit(None, events, head, budget=everything - 5_000, ratio=1.0, focus=None, todos=())
    assert one is not None
    assert one.trimmed == (results[0],)
    assert one.omitted == ()
    sent = history(events, head, one)
    texts = [joined_text(m.result.content) for m in sent if isinstance(m, ToolResultMessage)]
    assert texts[0].startswith("x" * 400)
    assert "39,600 more characters" in texts[0]
    assert texts[1] == "y" * 40_000

    both = fit(None, events, head, budget=2_000, ratio=1.0, focus=None, todos=())
    assert both is not None
    assert both.trimmed == tuple(results)
    assert both.omitted == ()

    # Smaller than the messages themselves: the oldest go, and the request says so.
    asking = text_tokens(instruction(None, (), 1))
    tight = fit(None, events, head, budget=asking + 150, ratio=1.0, focus=None, todos=())
    assert tight is not None
    assert tight.omitted
    assert tight.omitted == head[: len(tight.omitted)]
    request = build_request(
        None, events, head, tight, call=Call("deepseek", "m", None, None), focus=None, todos=()
    )
    assert f"The oldest {len(tight.omitted)} messages" in request.messages[-1].text()
    assert "one" not in [m.text() for m in request.messages]

    assert fit(None, events, head, budget=10, ratio=1.0, focus=None, todos=()) is None


def test_keep_must_stay_below_the_threshold() -> None:
    assert Config().threshold == 0.85
    with pytest.raises(ValidationError):
        Config(threshold=0.5, keep=0.6)
    with pytest.raises(ValidationError):
        Config(threshold=1.5)
