"""The agent handle and the turn/step loop, in process, against the scripted server.

Turns and steps, what a step's request carries, and a turn that cannot be stored; the
interception points and the inbox have modules of their own (test_agent_interception,
test_agent_inbox).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.llm import PluginSource, TextBlock, user_text
from dsh.runtime import Runtime
from dsh.services import PROMPT, TOOLS
from dsh.session import check_log
from dsh.session.payloads import CancelByUser
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ToolContext, ToolDefinition, ToolOutput
from tests.agent.agent_support import EchoArgs, new_agent, of, reconstructable, texts, types
from tests.support.waits import HANG_S

# ---------------------------------------------------------------------- turns and steps


async def test_a_tool_step_then_an_answer(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(
            reasoning="Use the tool.",
            tool_calls=[ToolCallSpec(name="echo", arguments={"text": "hi"})],
        )
    )
    fake_llm.add(Reply(text="It said hi."))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("say hi"))
    assert agent.status == "running"  # A1: running at once
    await agent.when_idle()  # A6
    assert agent.status == "idle"
    assert types(agent)[-1] == "turn/end"
    [result] = of(agent, "tool/result")
    assert result.data.message.result.content == (TextBlock(text="echo: hi"),)
    assert [e.data.reason for e in of(agent, "request/header")] == ["initial", "repeat"]
    assert of(agent, "turn/end")[0].data.reason.kind == "completed"
    reconstructable(agent, fake_llm)


async def test_followups_run_as_turns_in_order(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    for n in range(3):
        fake_llm.add(Reply(text=f"answer {n}"))
    agent = await new_agent(runtime, tmp_path)
    for n in range(3):
        agent.followup(user_text(f"question {n}"))  # A2
    await agent.when_idle()
    assert [e.data.turn for e in of(agent, "turn/start")] == [1, 2, 3]
    assert [texts(r.body)[-1] for r in fake_llm.chat_requests] == [
        "question 0",
        "question 1",
        "question 2",
    ]
    reconstructable(agent, fake_llm)


async def test_cancelling_an_idle_agent_does_nothing(runtime: Runtime, tmp_path: Path) -> None:
    agent = await new_agent(runtime, tmp_path)
    before = len(agent.session.events)
    agent.cancel(CancelByUser())  # A3
    assert len(agent.session.events) == before


async def test_cancel_during_a_tool_aborts_cleanly(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="echo", arguments={"text": "slow", "delay": 5}),
                # Not read-only (unknown), so it waits for the first: the cancel comes first.
                ToolCallSpec(name="exclusive", arguments={"text": "never"}),
            ]
        )
    )
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("go"))
    started = asyncio.Event()
    agent.session.subscribe(lambda e: started.set() if e.type == "tool/call" else None)
    await asyncio.wait_for(started.wait(), 5)
    agent.cancel(CancelByUser())
    await asyncio.wait_for(agent.when_idle(), 2)
    end = of(agent, "turn/end")[0].data.reason
    assert end.kind == "aborted"  # A4
    assert end.reason.kind == "user"
    codes = [e.data.error.code for e in of(agent, "tool/result")]
    assert codes == ["TOOL_CANCELLED", "ABORTED_BEFORE_DISPATCH"]
    assert check_log(agent.session.events) == []


async def test_max_tokens_runs_no_tools(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(
            text="Let me",
            tool_calls=[ToolCallSpec(name="echo", arguments={"text": "x"})],
            finish_reason="length",
        )
    )
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    assert of(agent, "tool/call") == []  # A7
    assert of(agent, "turn/end")[0].data.reason.kind == "max-tokens"


async def test_max_steps_ends_a_runaway_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    for _ in range(3):
        fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "again"})]))
    agent = await new_agent(runtime, tmp_path, max_steps=2)
    agent.followup(user_text("loop forever"))
    await agent.when_idle()
    end = of(agent, "turn/end")[0].data.reason
    assert (end.kind, end.limit) == ("max-steps", 2)
    assert len(of(agent, "step/start")) == 2
    reconstructable(agent, fake_llm)


async def test_read_only_calls_run_side_by_side(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # Each call waits until all four have started: run one after the other, the first
    # would wait alone until its bound. (No clock: a loaded machine cannot fail it.)
    barrier = asyncio.Barrier(4)

    async def meet(args: EchoArgs, context: ToolContext) -> str:
        try:
            async with asyncio.timeout(HANG_S):
                await barrier.wait()
        except TimeoutError:
            return f"alone: {args.text}"
        return f"met: {args.text}"

    runtime.root.get(TOOLS).register(
        "meet",
        ToolDefinition(
            name="meet",
            description="Wait for the others.",
            arguments=EchoArgs,
            execute=meet,
            read_only=True,
        ),
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="meet", arguments={"text": str(n)}) for n in range(4)])
    )
    fake_llm.add(Reply(text="all back"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("four at once"))
    await agent.when_idle()
    results = [e.data.message.result.content[0].text for e in of(agent, "tool/result")]
    assert results == [f"met: {n}" for n in range(4)]  # logged in the model's order
    reconstructable(agent, fake_llm)


async def test_tool_errors_reach_the_model_and_the_turn_goes_on(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="nope", arguments={}),
                ToolCallSpec(name="echo", arguments="{not json"),
                ToolCallSpec(name="echo", arguments={"txt": "typo"}),
            ]
        )
    )
    fake_llm.add(Reply(text="Sorry."))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    assert [e.data.error.code for e in of(agent, "tool/result")] == [
        "UNKNOWN_TOOL",
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
    ]
    tool_messages = [m for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "tool"]
    unknown = tool_messages[0]["content"]
    assert unknown.startswith("Error: unknown tool 'nope'. Available tools: ")
    assert "echo" in unknown.split("Available tools: ")[1]
    assert "not valid JSON" in tool_messages[1]["content"]
    assert "text: Field required" in tool_messages[2]["content"]
    assert of(agent, "turn/end")[0].data.reason.kind == "completed"


async def test_context_entries_are_entered_only_when_they_change(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    facts = {"branch": "main"}
    runtime.root.get(PROMPT).context("repo-facts", 5, lambda pc: f"branch: {facts['branch']}")
    for _ in range(3):
        fake_llm.add(Reply(text="ok"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("one"))
    agent.followup(user_text("two"))
    await agent.when_idle()
    facts["branch"] = "feature"
    agent.followup(user_text("three"))
    await agent.when_idle()
    entered = [
        e.data.text()
        for e in of(agent, "user/message")
        if isinstance(e.data.source, PluginSource) and e.data.source.plugin == "repo-facts"
    ]
    assert entered == ["branch: main", "branch: feature"]
    reconstructable(agent, fake_llm)


async def test_the_workspace_value_moves_at_each_turn_and_after_effects(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """What a step's prompt may reuse: files read under the same workspace value (git
    status, instructions, skills) are read again after an edit, not after reads."""

    async def touch(args: EchoArgs, context: ToolContext) -> str:
        (tmp_path / "touched").write_text(args.text)
        return "written"

    runtime.root.get(TOOLS).register(
        "touch",
        ToolDefinition(
            name="touch", description="Write a file.", arguments=EchoArgs, execute=touch
        ),
    )
    seen: list[tuple[int, int]] = []
    runtime.root.get(PROMPT).context("probe", 5, lambda pc: seen.append(pc.workspace) and None)
    echo_call = ToolCallSpec(name="echo", arguments={"text": "read"})
    fake_llm.add(Reply(tool_calls=[echo_call]))
    fake_llm.add(Reply(tool_calls=[echo_call]))
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="touch", arguments={"text": "x"})]))
    fake_llm.add(Reply(tool_calls=[echo_call]))
    fake_llm.add(Reply(text="done"))
    fake_llm.add(Reply(text="again"))
    agent = await new_agent(runtime, tmp_path)
    approvals = runtime.agents.services.tools.approvals
    assert approvals is not None
    approvals.mode = "bypass"  # nobody is here to approve the write
    agent.followup(user_text("read, read, write, read"))
    await agent.when_idle()
    agent.followup(user_text("once more"))
    await agent.when_idle()
    # One assembly a step: five in the first turn (the write was its third), one next.
    assert seen == [(1, 0), (1, 0), (1, 0), (1, 1), (1, 1), (2, 0)]
    assert (tmp_path / "touched").read_text() == "x"


async def test_tool_context_and_concluding_tools(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    class Nothing(BaseModel):
        pass

    async def finish(args: Nothing, context: ToolContext) -> ToolOutput:
        return ToolOutput(content="submitted", additional_contexts=(user_text("a note for later"),))

    runtime.root.get(TOOLS).register(
        "submit",
        ToolDefinition(
            name="submit",
            description="Submit.",
            arguments=Nothing,
            read_only=True,
            execute=finish,
            concludes_turn=True,
        ),
    )
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="submit", arguments={})]))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("submit it"))
    await agent.when_idle()
    assert len(fake_llm.chat_requests) == 1  # concluded: no further request
    assert of(agent, "turn/end")[0].data.reason.kind == "completed"
    assert agent.inbox.staged == ()
    assert of(agent, "user/message")[-1].data.text() == "a note for later"  # kept, after the turn
    assert of(agent, "user/message")[-1].seq > of(agent, "turn/end")[0].seq


async def test_a_turn_whose_events_cannot_be_written_does_not_complete(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while the answer streams, and the turn ends before the writer
    has tried (its window is 0.2 s, the answer a few milliseconds): the turn's end
    still finds out, and the turn fails rather than complete unstored (issue 34)."""
    fake_llm.add(Reply(text="an answer that cannot be stored"))
    agent = await new_agent(runtime, tmp_path)
    persistence = runtime.sessions.persistence
    append = persistence.append

    async def full_once_the_answer_streams(
        session_id: Any, events: Any, *, sync: bool = True
    ) -> None:
        if any(event.type == "assistant/chunk" for event in events):
            raise OSError(28, "No space left on device")
        await append(session_id, events, sync=sync)

    monkeypatch.setattr(persistence, "append", full_once_the_answer_streams)
    agent.followup(user_text("answer"))
    await agent.when_idle()

    reason = of(agent, "turn/end")[0].data.reason
    assert reason.kind == "error"
    assert reason.error.code == "SESSION_WRITE_FAILED"
    assert "No space left on device" in reason.error.message
