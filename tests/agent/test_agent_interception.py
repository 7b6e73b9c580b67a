"""The agent loop's interception points, in process, against the scripted server:
listeners that block or rewrite a prompt, reject a step, switch the model, retry
a failed request or keep a turn going, and listeners scoped to one agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dsh.agent import (
    Agent,
    PreRequest,
    PreStep,
    PreStepDecision,
    PromptAllow,
    PromptBlock,
    PromptDecision,
    PromptSubmit,
    Reject,
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
from dsh.llm import LlmCallConfig, TextBlock, user_text
from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Fault, Reply
from tests.agent.agent_support import new_agent, of, reconstructable, texts, types


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
