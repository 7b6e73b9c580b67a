"""The agent handle and the turn/step loop, in process, against the scripted server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.agent import (
    Agent,
    Edit,
    PreRequest,
    PreStep,
    PreStepDecision,
    PromptAllow,
    PromptBlock,
    PromptDecision,
    PromptSubmit,
    Reject,
    Remove,
    RequestError,
    Retry,
)
from dsh.agent.signal import TurnSignal
from dsh.hooks import (
    AGENT_CREATED,
    AGENT_DISPOSED,
    AGENT_PRE_STEP,
    AGENT_PROMPT_BLOCKED,
    AGENT_PROMPT_SUBMIT,
    AGENT_REQUEST,
    AGENT_REQUEST_ERROR,
    AGENT_SESSION_START,
    AGENT_STATUS,
    AGENT_TURN_STOPPING,
)
from dsh.kernel import Context, Next
from dsh.llm import LlmCallConfig, PluginSource, TextBlock, user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import PROMPT, TOOLS
from dsh.session import SessionEvent, check_log
from dsh.session.payloads import CancelByUser
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec
from dsh.testing.reconstruct import check_requests
from dsh.tools import ToolContext, ToolDefinition, ToolOutput
from dsh_plugins._shared.chat_completions import ChatModel, request_body
from dsh_plugins.llm_deepseek import DEFAULT_MODELS
from tests.support.waits import HANG_S


class EchoArgs(BaseModel):
    text: str
    delay: float = 0.0


async def echo(args: EchoArgs, context: ToolContext) -> str:
    if args.delay:
        await asyncio.sleep(args.delay)
    return f"echo: {args.text}"


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={
            "llm-deepseek": {
                "base_url": fake_llm.base_url,
                "retry": {"max_retries": 2, "base_delay_ms": 1},
            }
        },
    )
    started.root.get(TOOLS).register(
        "echo",
        ToolDefinition(
            name="echo",
            description="Say it back.",
            arguments=EchoArgs,
            execute=echo,
            read_only=True,
        ),
    )
    yield started
    await started.aclose()


async def new_agent(runtime: Runtime, tmp_path: Path, **options: Any) -> Agent:
    return await runtime.agents.create(tmp_path, runtime.agents.defaults.model_copy(update=options))


def types(agent: Agent, *, chunks: bool = False) -> list[str]:
    return [e.type for e in agent.session.events if chunks or e.type != "assistant/chunk"]


def of(agent: Agent, kind: str) -> list[SessionEvent]:
    return [e for e in agent.session.events if e.type == kind]


def reconstructable(agent: Agent, server: FakeLLM) -> None:
    assert check_log(agent.session.events) == []
    check_requests(
        agent.session.events,
        [r.body for r in server.chat_requests],
        lambda o: request_body(o, DEFAULT_MODELS.get(o.model, ChatModel())),
    )


def texts(request_body_: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request_body_["messages"]]


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


# ---------------------------------------------------------------------- interception


async def test_prompt_submit_can_block_or_rewrite(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async def policy(
        submit: PromptSubmit, next: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        text = submit.message.text()
        if "secret" in text:
            return PromptBlock("prompts about secrets are not allowed")
        return PromptAllow(
            content=(TextBlock(text=text.upper()),),
            additional_contexts=(user_text("context from a hook"),),
        )

    blocked: list[tuple[str, str]] = []
    runtime.root.on(AGENT_PROMPT_SUBMIT, policy)
    runtime.root.on(
        AGENT_PROMPT_BLOCKED,
        lambda agent, message, reason: blocked.append((message.text(), reason)),
    )
    fake_llm.add(Reply(text="ok"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("tell me the secret"))
    agent.followup(user_text("hello"))
    await agent.when_idle()
    [discarded] = of(agent, "inbox/discarded")
    assert (discarded.data.reason, discarded.data.detail) == (
        "blocked",
        "prompts about secrets are not allowed",
    )
    assert blocked == [("tell me the secret", "prompts about secrets are not allowed")]
    assert len(of(agent, "turn/start")) == 1
    assert texts(fake_llm.chat_requests[0].body)[-2:] == ["HELLO", "context from a hook"]


async def test_pre_step_can_reject_the_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async def reject(pre: PreStep, next: Next[PreStep, PreStepDecision]) -> PreStepDecision:
        return Reject("not now")

    runtime.root.on(AGENT_PRE_STEP, reject)
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    assert types(agent)[-2:] == ["turn/start", "turn/end"]  # A5: no step at all
    assert of(agent, "turn/end")[0].data.reason.kind == "blocked"
    assert fake_llm.chat_requests == []


async def test_request_can_switch_the_model(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async def pro(request: PreRequest, next: Next[PreRequest, LlmCallConfig]) -> LlmCallConfig:
        update = {"model": "deepseek-v4-pro", "reasoning_effort": "max"}
        return await next(replace(request, config=request.config.model_copy(update=update)))

    runtime.root.on(AGENT_REQUEST, pro)
    fake_llm.add(Reply(text="ok"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("hard problem"))
    await agent.when_idle()
    body = fake_llm.chat_requests[0].body
    assert (body["model"], body["reasoning_effort"]) == ("deepseek-v4-pro", "max")
    reconstructable(agent, fake_llm)


async def test_request_error_retry_keeps_one_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    attempts: list[str] = []

    async def recover(error: RequestError, next: Next[RequestError, Retry | None]) -> Retry | None:
        attempts.append(error.failure.code)
        return Retry() if len(attempts) == 1 else await next()

    runtime.root.on(AGENT_REQUEST_ERROR, recover)
    fake_llm.add(Reply(fault=Fault(status=400, body={"error": {"message": "transient"}})))
    fake_llm.add(Reply(text="second time lucky"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    assert attempts == ["INVALID_REQUEST"]
    assert len(of(agent, "turn/start")) == 1  # A8
    assert [m.text() for m in agent.session.derive_messages() if m.role == "assistant"] == [
        "second time lucky"
    ]
    reconstructable(agent, fake_llm)


async def test_a_turn_stopping_listener_can_keep_the_turn_going(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    nudged: list[int] = []

    async def nudge(agent: Agent, turn: int, signal: TurnSignal) -> bool:
        if nudged:
            return False
        nudged.append(turn)
        agent.steer(user_text("double-check that"))
        return True  # the listeners after this one are not asked

    runtime.root.on(AGENT_TURN_STOPPING, nudge)
    runtime.root.on(AGENT_TURN_STOPPING, lambda agent, turn, signal: nudged.append(-turn))
    fake_llm.add(Reply(text="done"))
    fake_llm.add(Reply(text="checked"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    assert len(of(agent, "turn/start")) == 1
    assert len(of(agent, "step/start")) == 2
    assert [e.data.text() for e in of(agent, "steering/message")] == ["double-check that"]
    assert nudged == [1, -1]  # asked once the nudge had been given


async def test_an_agent_scoped_listener_hears_only_its_own_agent(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    heard: list[tuple[str, str, str]] = []

    def listen(ctx: Context, who: str) -> None:
        def note(hook: str) -> Callable[..., None]:
            return lambda agent, *rest: heard.append((who, hook, agent.id))

        ctx.on(AGENT_CREATED, note("created"))
        ctx.on(AGENT_SESSION_START, note("session-start"))
        ctx.on(AGENT_STATUS, note("status"))
        ctx.on(AGENT_DISPOSED, note("disposed"))

        async def request(
            request: PreRequest, next: Next[PreRequest, LlmCallConfig]
        ) -> LlmCallConfig:
            heard.append((who, "request", request.agent.id))
            return await next()

        ctx.on(AGENT_REQUEST, request)

    listen(runtime.root, "global")
    first = await runtime.agents.create(tmp_path, setup=lambda ctx: listen(ctx, "first"))
    second = await new_agent(runtime, tmp_path)
    for agent in (first, second):
        fake_llm.add(Reply(text="ok"))
        agent.followup(user_text("go"))
        await agent.when_idle()
    await runtime.agents.dispose(first)
    await runtime.agents.dispose(second)
    hooks = ["created", "session-start", "status", "request", "status", "disposed"]
    assert [(who, hook) for who, hook, agent_id in heard if agent_id == first.id] == [
        (who, hook) for hook in hooks for who in ("global", "first")
    ][:-1]  # the agent's own context is gone before it is disposed of
    assert {who for who, hook, agent_id in heard if agent_id == second.id} == {"global"}
    assert [hook for who, hook, agent_id in heard if agent_id == second.id] == hooks


# ---------------------------------------------------------------------- the inbox


async def test_steering_joins_the_running_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "a", "delay": 0.3})])
    )
    fake_llm.add(Reply(text="noted"))
    agent = await new_agent(runtime, tmp_path)
    assert not agent.try_steer(user_text("too early"))  # idle: nothing to join
    agent.followup(user_text("go"))
    running = asyncio.Event()
    agent.session.subscribe(lambda e: running.set() if e.type == "tool/call" else None)
    await asyncio.wait_for(running.wait(), 5)
    assert agent.accepts_next_step
    assert agent.try_steer(user_text("use British spelling"))
    agent.inject(user_text("the user is on a train"))
    await agent.when_idle()
    assert len(of(agent, "turn/start")) == 1
    second = texts(fake_llm.chat_requests[1].body)
    assert second[-2:] == ["use British spelling", "the user is on a train"]
    assert [e.data.text() for e in of(agent, "steering/message")] == ["use British spelling"]
    reconstructable(agent, fake_llm)


async def test_steering_left_over_keeps_its_place_before_later_prompts(
    runtime: Runtime, tmp_path: Path
) -> None:
    """A steer that missed its turn waits as a prompt in the order it was sent, as a
    resumed log reads it: Enter, Enter as a turn ended (the first a steer the turn
    no longer took, the second queued) sent them the other way round (issue 36's
    input fuzzer, seed 1869)."""
    from dsh.agent.inbox import Inbox

    agent = await new_agent(runtime, tmp_path)
    inbox = agent.inbox
    inbox.enqueue(user_text("queued before"), "queued")
    inbox.enqueue(user_text("first"), "steering")
    inbox.enqueue(user_text("second"), "queued")
    inbox.close_turn()
    wanted = ["queued before", "first", "second"]
    assert [item.message.text() for item in inbox.queued] == wanted
    resumed = Inbox(agent.session)
    resumed.restore(agent.session.events)
    assert [item.message.text() for item in resumed.queued] == wanted


async def test_steering_while_idle_becomes_a_followup_and_inject_appends(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="ok"))
    agent = await new_agent(runtime, tmp_path)
    agent.inject(user_text("background fact"))
    assert of(agent, "user/message")[-1].data.text() == "background fact"
    assert agent.status == "idle"
    agent.steer(user_text("now go"))
    await agent.when_idle()
    assert len(of(agent, "turn/start")) == 1
    assert texts(fake_llm.chat_requests[0].body)[1] == "background fact"


async def test_queued_prompts_can_be_edited_or_removed(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "a", "delay": 0.3})])
    )
    fake_llm.add(Reply(text="first done"))
    fake_llm.add(Reply(text="edited done"))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("first"))
    keep = agent.followup(user_text("second, with a typo"))
    drop = agent.followup(user_text("third"))
    assert keep is not None
    assert drop is not None
    assert agent.update_inbox(keep.id, Edit((TextBlock(text="second, fixed"),)))
    assert agent.update_inbox(drop.id, Remove())
    assert not agent.update_inbox("no-such-item", Remove())
    await agent.when_idle()
    assert [texts(r.body)[-1] for r in fake_llm.chat_requests][-1] == "second, fixed"
    assert len(of(agent, "turn/start")) == 2


async def test_queued_prompts_survive_and_are_restored_on_resume(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="slow", gate="held"))  # the first turn cannot end on its own
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("first"))
    agent.followup(user_text("typed while it worked"))
    for _ in range(int(HANG_S / 0.01)):  # the first turn runs: its request is held
        if fake_llm.chat_requests:
            break
        await asyncio.sleep(0.01)
    await runtime.agents.dispose(agent)  # as good as a crash: the queue was never run

    fake_llm.add(Reply(text="picked up"))
    resumed = await runtime.agents.resume(agent.id)
    assert [i.message.text() for i in resumed.inbox.queued] == ["typed while it worked"]
    assert resumed.status == "idle"
    resumed.followup(user_text("and this"))
    fake_llm.add(Reply(text="and that"))
    await resumed.when_idle()
    ends = [e.data.reason.kind for e in of(resumed, "turn/end")]
    assert ends == ["aborted", "completed", "completed"]
    assert [texts(r.body)[-1] for r in fake_llm.chat_requests[-2:]] == [
        "typed while it worked",
        "and this",
    ]
    assert [e.data.reason for e in of(resumed, "request/header")][-2] == "resume"


async def test_a_partial_answer_cut_by_cancel_is_in_the_next_request(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="The answer is definitely forty-two", chunk_size=4, chunk_delay_ms=40))
    fake_llm.add(Reply(text="As I was saying."))
    agent = await new_agent(runtime, tmp_path)
    agent.followup(user_text("what is it?"))
    streaming = asyncio.Event()
    agent.session.subscribe(
        lambda e: streaming.set() if e.type == "assistant/chunk" and e.seq > 12 else None
    )
    await asyncio.wait_for(streaming.wait(), 5)
    agent.cancel(CancelByUser())
    await agent.when_idle()
    [partial] = of(agent, "assistant/message")
    assert partial.data.interrupted is True
    seen = partial.data.message.text()
    assert seen
    assert "The answer".startswith(seen[:10]) or seen.startswith("The")
    agent.followup(user_text("go on"))
    await agent.when_idle()
    assistant = [m for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == seen  # A9
    reconstructable(agent, fake_llm)


async def test_reservation_holds_the_next_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="after maintenance"))
    agent = await new_agent(runtime, tmp_path)
    order: list[str] = []

    async def maintenance() -> str:
        agent.followup(user_text("queued meanwhile"))
        await asyncio.sleep(0.05)
        order.append("maintenance")
        return "compacted"

    assert await agent.run_maintenance(maintenance) == "compacted"
    await agent.when_idle()
    order.append("turn" if of(agent, "turn/start") else "no turn")
    assert order == ["maintenance", "turn"]
    assert of(agent, "turn/start")[0].seq > 0


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
