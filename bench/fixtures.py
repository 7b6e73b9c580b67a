"""Realistic sessions for the benchmarks: a coding session's log as dsh writes it.

:func:`a_working_session` builds the events of ``turns`` turns, each a prompt then
``calls`` steps that each stream some reasoning, a line of text and one tool call
(``read`` of a 40-200 line Python file, or ``bash`` running tests, grep, git), and
the call's result, then a final step with the answer. The shapes are the ones a real
turn logs (inbox/enqueued and claimed, turn/start, step/start, user/message, a
request/header (the full header once, then ``repeat``), request/context once, the
assistant/chunk stream (block starts, deltas, block ends, usage, finish), the
assistant/message with its usage, tool/call, tool/result citing its call, step/end,
turn/end), and the tool names and arguments are what the real tools take, so the TUI
draws their cards as in real use. Tool outputs are a few KB each; about one call in
twelve fails (a file that does not exist) and some test runs exit non-zero.

20 turns of 19 calls make about 13,200 events (the issue's 13,220);
:func:`a_large_working_session` makes 100,000 the same way, with more turns.

Deltas are a few words each (a streamed token or several, as the provider's chunks
come), stamped on a simulated clock: 25 ms a delta, a tool taking 0.1-2 s, prompts
minutes apart.

Run ``.venv/bin/python bench/fixtures.py`` to print the counts.
"""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from dsh.llm import (
    AssistantMessage,
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishStop,
    FinishToolCalls,
    ModelSource,
    ReasoningBlock,
    ReasoningDelta,
    SessionId,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
    tool_result,
    user_text,
)
from dsh.llm.messages import PluginSource, UserMessage
from dsh.llm.request import LlmCallConfig
from dsh.session.events import SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.payloads import (
    AssistantChunk,
    AssistantMessageData,
    EpochHeader,
    InboxClaimed,
    InboxEnqueued,
    PromptTrigger,
    RequestContext,
    RequestHeader,
    StepEnd,
    StepStart,
    ToolCall,
    ToolErrorIdentity,
    ToolResult,
    TurnCompleted,
    TurnEnd,
    TurnStart,
)
from dsh.session.session import Session
from dsh.session.writer import BOUNDARY_TYPES

PROVIDER, MODEL = "deepseek", "deepseek-flash"
CWD = "/home/dev/project"
CREATED_AT = 1_780_000_000_000
WINDOW = 0.2  # s, the writer window SessionStore uses by default
TOKEN_MS = 25  # simulated time between deltas (40 deltas/s)
LARGE_EVENTS = 100_000

REPEAT = object()
"""In a plan, a request/header that repeats the latest full one (its seq is known
only when the plan is replayed)."""

Plan = list[tuple[str, Any]]

VOCABULARY = """
the a to of and in is it that for this with on we file test line code function return
value error call path module class import change update check run build read write config
result type list field name parse load store event session step turn model user tool output
input index search query table row batch flush handler retry cache window token
"""
MODULE_NAMES = """
session store writer catalog jsonl events loop turn agent runtime tools registry prompt
history compaction render status app config settings http stream parser assembler
"""
FUNCTION_NAMES = """
load append flush parse render build resolve check merge apply close open read write
claim replay fold derive encode decode measure schedule cancel restart attach
"""
WORDS, MODULES, FUNCS = VOCABULARY.split(), MODULE_NAMES.split(), FUNCTION_NAMES.split()


def a_header(
    session_id: str = "bench-working", cwd: str = CWD, created_at: int = CREATED_AT
) -> SessionHeader:
    return SessionHeader(id=SessionId(session_id), created_at=created_at, cwd=cwd, model=MODEL)


# ---------------------------------------------------------------------- the text


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _split(rng: random.Random, text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` non-empty deltas (fewer if it is shorter)."""
    pieces = max(1, min(pieces, len(text)))
    cuts = sorted(rng.sample(range(1, len(text)), pieces - 1)) if pieces > 1 else []
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _python_file(rng: random.Random, lines: int) -> list[str]:
    """``lines`` lines that read like a module of this project."""
    out = [
        f'"""The {rng.choice(MODULES)} {rng.choice(WORDS)}: {_words(rng, 4, 9)}."""',
        "",
        "from __future__ import annotations",
        "",
        "import asyncio",
        f"from dsh.{rng.choice(MODULES)} import {rng.choice(FUNCS).title()}Error",
        "",
    ]
    while len(out) < lines:
        name = f"{rng.choice(FUNCS)}_{rng.choice(WORDS)}"
        out += [
            "",
            f"async def {name}(self, {rng.choice(WORDS)}: str, *, limit: int = 10) -> bool:",
            f'    """{_words(rng, 5, 12).capitalize()}."""',
        ]
        for _ in range(rng.randint(3, 12)):
            kind = rng.random()
            if kind < 0.3:
                out.append(f"    # {_words(rng, 4, 10)}")
            elif kind < 0.6:
                out.append(
                    f"    {rng.choice(WORDS)} = await self.{rng.choice(FUNCS)}"
                    f"({rng.choice(WORDS)!r}, limit=limit)"
                )
            elif kind < 0.8:
                out.append(f"    if not {rng.choice(WORDS)}:")
                out.append(f"        raise {rng.choice(FUNCS).title()}Error({_words(rng, 3, 7)!r})")
            else:
                out.append(f"    for item in self.{rng.choice(WORDS)}s:")
                out.append(f"        item.{rng.choice(FUNCS)}()")
        out.append("    return True")
    return out[:lines]


def _read_output(rng: random.Random, path: str) -> tuple[str, dict[str, Any]]:
    """What ``read`` returns for a whole Python file of 40-200 lines."""
    rows = _python_file(rng, rng.randint(40, 200))
    body = "\n".join(f"{n}: {line}" for n, line in enumerate(rows, 1))
    text = (
        f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n\n"
        f"(End of file: {len(rows)} lines in total.)\n</content>"
    )
    meta = {
        "path": path,
        "file": f"{CWD}/{path}",
        "offset": 1,
        "lines": len(rows),
        "total_lines": len(rows),
        "lang": "python",
    }
    return text, meta


def _bash(rng: random.Random) -> tuple[dict[str, str], str, int]:
    """A command, as the model writes it, with its output and exit code."""
    kind = rng.random()
    module = rng.choice(MODULES)
    if kind < 0.4:
        failed = rng.random() < 0.3
        tests = [f"tests/test_{module}.py::test_{rng.choice(FUNCS)}_{i}" for i in range(40)]
        lines = [
            "============================= test session starts ==============================",
            "platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0",
            f"collected {len(tests)} items",
            "",
            *(f"{t} {'FAILED' if failed and i == 7 else 'PASSED'}" for i, t in enumerate(tests)),
        ]
        if failed:
            lines += [
                "",
                "=================================== FAILURES ===================================",
                f"_____ test_{rng.choice(FUNCS)}_7 _____",
                *(f"    {line}" for line in _python_file(rng, 14)[7:]),
                f"E       AssertionError: assert {rng.randint(1, 99)} == {rng.randint(100, 200)}",
                f"FAILED {tests[7]} - AssertionError",
                f"========================= 1 failed, 39 passed in {rng.uniform(0.5, 4):.2f}s =========================",
            ]
        else:
            lines.append(
                f"============================== 40 passed in {rng.uniform(0.5, 4):.2f}s =============================="
            )
        command = f"python -m pytest tests/test_{module}.py -v"
        return (
            {"command": command, "description": f"Run the {module} tests"},
            "\n".join(lines),
            (1 if failed else 0),
        )
    if kind < 0.8:
        word = rng.choice(FUNCS)
        hits = [
            f"dsh/{rng.choice(MODULES)}/{rng.choice(MODULES)}.py:{rng.randint(1, 400)}:"
            f"    {rng.choice(WORDS)} = self.{word}({_words(rng, 1, 3).replace(' ', ', ')})"
            for _ in range(rng.randint(10, 60))
        ]
        command = f"grep -rn '{word}(' dsh/ | head -80"
        return (
            {"command": command, "description": f"Find the callers of {word}"},
            "\n".join(hits),
            0,
        )
    lines = [f"diff --git a/dsh/{module}.py b/dsh/{module}.py", "--- a/x", "+++ b/x"]
    for _ in range(rng.randint(3, 8)):
        lines.append(f"@@ -{rng.randint(1, 300)},7 +{rng.randint(1, 300)},8 @@")
        lines += [f" {line}" for line in _python_file(rng, 12)[7:10]]
        lines.append(f"-    {_words(rng, 3, 8)}")
        lines.append(f"+    {_words(rng, 3, 8)}")
    return {"command": "git diff", "description": "Show the changes so far"}, "\n".join(lines), 0


# ---------------------------------------------------------------------- the events


def _chunk(turn: int, step: int, chunk: Any) -> tuple[str, Any]:
    return ("assistant/chunk", AssistantChunk(turn=turn, step=step, chunk=chunk))


def _step(
    rng: random.Random,
    turn: int,
    step: int,
    *,
    first: bool,
    reasoning: str,
    text: str,
    call: ToolCallBlock | None,
    deltas: tuple[int, int, int],
) -> Plan:
    """One model call's events: the request, the streamed blocks, the message."""
    plan: Plan = [("step/start", StepStart(turn=turn, step=step))]
    if first:
        header = EpochHeader(
            config=LlmCallConfig(
                provider=PROVIDER, model=MODEL, reasoning_effort="high", max_tokens=384_000
            ),
            system="You are dsh, a coding agent working in the user's terminal. "
            + _words(rng, 200, 300),
        )
        plan.append(("request/header", RequestHeader(header=header, reason="initial")))
        plan.append(
            (
                "request/context",
                RequestContext(provider=PROVIDER, model=MODEL, context_window=1_000_000),
            )
        )
    else:
        plan.append(("request/header", REPEAT))
    blocks: list[Any] = []
    index = 0
    for kind, content, pieces in (("reasoning", reasoning, deltas[0]), ("text", text, deltas[1])):
        if not content:
            continue
        plan.append(_chunk(turn, step, BlockStart(index=index, block_type=kind)))  # type: ignore[arg-type]
        delta = ReasoningDelta if kind == "reasoning" else TextDelta
        plan += [
            _chunk(turn, step, delta(index=index, text=piece))
            for piece in _split(rng, content, pieces)
        ]
        blocks.append(
            ReasoningBlock(text=content) if kind == "reasoning" else TextBlock(text=content)
        )
        index += 1
    if call is not None:
        plan.append(_chunk(turn, step, BlockStart(index=index, block_type="tool-call")))
        plan.append(_chunk(turn, step, ToolCallDelta(index=index, id=call.id, name=call.name)))
        plan += [
            _chunk(turn, step, ToolCallDelta(index=index, id=call.id, arguments_delta=piece))
            for piece in _split(rng, call.arguments, deltas[2])
        ]
        blocks.append(call)
    plan += [_chunk(turn, step, BlockEnd(index=i, block=b)) for i, b in enumerate(blocks)]
    output = len(reasoning + text + (call.arguments if call else "")) // 4
    usage = TokenUsage(
        input_tokens=rng.randint(500, 3_000),
        output_tokens=output,
        # the context grows a step at a time, as if compacted at 600k tokens
        cache_read_tokens=min(6_000 + 1_000 * ((turn - 1) * 20 + step), 600_000),
        reasoning_tokens=len(reasoning) // 4,
    )
    plan.append(_chunk(turn, step, UsageChunk(usage=usage)))
    finish = FinishToolCalls() if call is not None else FinishStop()
    plan.append(_chunk(turn, step, Finish(reason=finish)))
    message = AssistantMessage(
        content=tuple(blocks), source=ModelSource(provider=PROVIDER, model=MODEL)
    )
    plan.append(
        (
            "assistant/message",
            AssistantMessageData(turn=turn, step=step, message=message, usage=usage),
        )
    )
    return plan


def _tool_step(rng: random.Random, turn: int, step: int, *, first: bool) -> Plan:
    call_id = CallId(f"call_00_{rng.getrandbits(96):024x}")
    error: ToolErrorIdentity | None = None
    if rng.random() < 0.55:
        path = f"dsh/{rng.choice(MODULES)}/{rng.choice(MODULES)}.py"
        arguments = {"file_path": path}
        name = "read"
        if rng.random() < 0.15:
            output = f"Error: {path} does not exist. Check the path (glob finds files by name)."
            meta: Any = None
            error = ToolErrorIdentity(name=name, code="FS_NOT_FOUND")
        else:
            output, meta = _read_output(rng, path)
    else:
        name = "bash"
        arguments, output, code = _bash(rng)
        if code:
            output += f"\n[exit code: {code}]"
        meta = {
            "exitCode": code,
            "signal": None,
            "timedOut": False,
            "durationMs": rng.randint(20, 4_000),
            "cwd": CWD,
            "spill": {},
        }
    call = ToolCallBlock(id=call_id, name=name, arguments=json.dumps(arguments))
    plan = _step(
        rng,
        turn,
        step,
        first=first,
        reasoning=_words(rng, 20, 60).capitalize() + ".",
        text=_words(rng, 4, 12).capitalize() + ".",
        call=call,
        deltas=(rng.randint(5, 11), rng.randint(1, 3), rng.randint(4, 8)),
    )
    plan.append(
        (
            "tool/call",
            ToolCall(turn=turn, step=step, call_id=call_id, name=name, arguments=call.arguments),
        )
    )
    message = tool_result(call_id, output, is_error=True if error else None)
    plan.append(
        ("tool/result", ToolResult(turn=turn, step=step, message=message, error=error, meta=meta))
    )
    plan.append(("step/end", StepEnd(turn=turn, step=step)))
    return plan


def _answer(rng: random.Random) -> str:
    paragraphs = [_words(rng, 30, 60).capitalize() + "." for _ in range(rng.randint(2, 4))]
    items = "\n".join(f"- `{rng.choice(FUNCS)}` {_words(rng, 4, 10)}" for _ in range(4))
    return "\n\n".join([paragraphs[0], items, *paragraphs[1:]])


def a_working_turn(rng: random.Random, turn: int, calls: int) -> Plan:
    """A prompt, ``calls`` steps of one tool call each, then the answer's step."""
    prompt = user_text(_words(rng, 8, 30).capitalize() + ".")
    item = uuid.UUID(int=rng.getrandbits(128)).hex
    plan: Plan = [
        ("inbox/enqueued", InboxEnqueued(item_id=item, message=prompt, placement="queued")),
        ("inbox/claimed", InboxClaimed(item_ids=(item,))),
        ("turn/start", TurnStart(turn=turn, trigger=PromptTrigger())),
    ]
    for step in range(1, calls + 1):
        plan += _tool_step(rng, turn, step, first=turn == 1 and step == 1)
        if step == 1:
            # the prompt goes in after the first step opens, as the loop enters it
            at = next(i for i, (t, _) in enumerate(plan) if t == "step/start") + 1
            entered: list[tuple[str, Any]] = [("user/message", prompt)]
            if turn == 1:
                snapshot = UserMessage(
                    content=(TextBlock(text="Today's date: 2026-12-04\nGit: branch main, clean"),),
                    source=PluginSource(plugin="environment", form="snapshot"),
                )
                entered.insert(0, ("user/message", snapshot))
            plan[at:at] = entered
    last = calls + 1
    plan += _step(
        rng,
        turn,
        last,
        first=turn == 1 and calls == 0,
        reasoning=_words(rng, 40, 80).capitalize() + ".",
        text=_answer(rng),
        call=None,
        deltas=(rng.randint(10, 20), rng.randint(30, 60), 0),
    )
    plan.append(("step/end", StepEnd(turn=turn, step=last)))
    plan.append(("turn/end", TurnEnd(turn=turn, reason=TurnCompleted())))
    return plan


def a_working_session(rng: random.Random, turns: int = 20, calls: int = 19) -> Plan:
    """``turns`` turns of ``calls`` tool calls each (20 x 19: about 13,200 events)."""
    plan: Plan = []
    for turn in range(1, turns + 1):
        plan += a_working_turn(rng, turn, calls)
    return plan


def a_large_working_session(rng: random.Random, events: int = LARGE_EVENTS) -> Plan:
    """Whole turns of 19 calls, as many as make at least ``events`` events (about 100,500
    for 100,000: the last turn is whole)."""
    plan: Plan = []
    turn = 0
    while len(plan) < events:
        turn += 1
        plan += a_working_turn(rng, turn, 19)
    return plan


# ---------------------------------------------------------------------- into a session


class Clock:
    """Simulated time: a delta every TOKEN_MS, a tool 0.1-2 s, prompts minutes apart."""

    def __init__(self, start: int, rng: random.Random) -> None:
        self.now = start
        self.rng = rng

    def advance(self, type_: str, data: Any) -> None:
        if type_ == "turn/start":
            self.now += self.rng.randint(60_000, 600_000)
        elif type_ == "assistant/chunk" and isinstance(
            data.chunk, TextDelta | ReasoningDelta | ToolCallDelta
        ):
            self.now += TOKEN_MS
        elif type_ == "tool/result":
            self.now += self.rng.randint(100, 2_000)
        elif type_ == "request/header":
            self.now += self.rng.randint(300, 1_500)  # to the first byte
        else:
            self.now += 1

    def __call__(self) -> int:
        return self.now


def replay(header: SessionHeader, plan: Plan) -> Session:
    """The session ``plan`` makes, stamped with simulated time: each tool/result cites
    its tool/call, and each repeated request/header the latest full one."""
    clock = Clock(header.created_at, random.Random(header.id))
    session = Session(header, clock=clock)
    calls: dict[str, int] = {}
    full_header = -1
    for type_, data in plan:
        clock.advance(type_, data)
        sources = None
        if data is REPEAT:
            data = RequestHeader(reason="repeat", same_as=full_header)
        elif type_ == "tool/result":
            sources = [calls.pop(data.message.result.tool_call_id)]
        event = session.append(type_, data, source_event_seqs=sources)
        if type_ == "tool/call":
            calls[data.call_id] = event.seq
        elif type_ == "request/header" and data.header is not None:
            full_header = event.seq
    return session


def writer_batches(events: Sequence[SessionEvent]) -> Iterator[Sequence[SessionEvent]]:
    """The batches the writer would have written at the simulated pace: cut at every
    boundary (``BOUNDARY_TYPES``), and when the window opened by a batch's first event
    ends."""
    start = 0
    for i, event in enumerate(events):
        if event.type in BOUNDARY_TYPES or event.time - events[start].time >= WINDOW * 1000:
            yield events[start : i + 1]
            start = i + 1
    if start < len(events):
        yield events[start:]


def main() -> None:
    from dsh.session.invariants import check_log

    for label, plan in (
        ("20 turns x 19 calls", a_working_session(random.Random(5))),
        ("large", a_large_working_session(random.Random(2))),
    ):
        session = replay(a_header(), plan)
        chunks = sum(1 for e in session.events if e.type == "assistant/chunk")
        results = [e for e in session.events if e.type == "tool/result"]
        size = sum(len(e.data.message.result.content[0].text) for e in results)
        problems = check_log(session.events)
        print(
            f"{label}: {len(session.events):,} events ({chunks:,} assistant/chunk, "
            f"{len(results):,} tool results averaging {size / len(results) / 1024:.1f} KiB); "
            f"check_log: {problems[:3] or 'clean'}"
        )


if __name__ == "__main__":
    main()
