"""The agent's inbox, in process, against the scripted server: steering a running
turn, queued prompts (edited, removed, kept across a resume), a cancelled partial
answer carried into the next request, and a reservation holding the next turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh.agent import (
    Edit,
    Remove,
)
from dsh.llm import TextBlock, user_text
from dsh.runtime import Runtime
from dsh.session.payloads import CancelByUser
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.agent.agent_support import new_agent, of, reconstructable, texts
from tests.support.waits import HANG_S


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
    await asyncio.wait_for(running.wait(), HANG_S)
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
    await asyncio.wait_for(streaming.wait(), HANG_S)
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
