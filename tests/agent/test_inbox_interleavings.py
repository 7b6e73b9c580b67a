"""No prompt is ever dropped: the inbox and the driver under any interleaving of
prompt, steer, cancel and turn end.

In process, with an adapter that stands in for the remote model (it answers each
request with the texts it was sent, after a few turns of the event loop, so a cancel
or a send can land anywhere in a turn). Thousands of seeded orders; each ends with one
more prompt and checks that every prompt sent was run or, for those in the inbox when
a cancel cleared it, discarded, that nothing is left waiting, and that the log holds.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.agent import Agent
from dsh.hooks import AGENT_STATUS
from dsh.llm import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishStop,
    GenerateOptions,
    LlmAdapter,
    ResolvedModel,
    StreamChunk,
    TextBlock,
    TextDelta,
    user_text,
)
from dsh.runtime import Runtime, start_runtime
from dsh.services import LLM
from dsh.session import check_log
from dsh.session.payloads import CancelByUser, InboxClaimed, InboxDiscarded, InboxEnqueued
from tests.support.waits import HANG_S

ORDERS = 2000
"""Seeded orders tried; each is a fresh agent on a fresh session."""


class Echoing(LlmAdapter):
    """Answers with the user texts it was sent, after ``pause`` turns of the loop."""

    def __init__(self) -> None:
        self.rng = random.Random(0)
        self.seen: set[str] = set()

    def resolve_model(self, provider: str, model: str) -> ResolvedModel:
        return ResolvedModel(provider=provider, id=model, name=model, context_window=1_000_000)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        for message in options.messages:
            if message.role == "user":
                self.seen.add(message.text())
        for _ in range(self.rng.randrange(6)):
            await asyncio.sleep(0)
        text = "ok"
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text=text)
        yield BlockEnd(index=0, block=TextBlock(text=text))
        yield Finish(reason=FinishStop())


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[tuple[Runtime, Echoing]]:
    started = await start_runtime(home=tmp_path / "home", cwd=tmp_path, candidates=())
    adapter = Echoing()
    started.root.get(LLM).register_adapter(["echoing"], adapter)
    yield started, adapter
    await started.aclose()


async def new_agent(runtime: Runtime, cwd: Path) -> Agent:
    options = runtime.agents.defaults.model_copy(update={"provider": "echoing", "model": "m"})
    return await runtime.agents.create(cwd, options)


async def idle(agent: Agent) -> None:
    await asyncio.wait_for(agent.when_idle(), HANG_S)


def account(agent: Agent) -> tuple[dict[str, str], set[str], set[str]]:
    """The log's inbox: text by item id, the ids claimed and the ids discarded."""
    texts: dict[str, str] = {}
    claimed: set[str] = set()
    discarded: set[str] = set()
    for event in agent.session.events:
        match event.data:
            case InboxEnqueued(item_id=item_id, message=message):
                texts[item_id] = message.text()
            case InboxClaimed(item_ids=ids):
                claimed.update(ids)
            case InboxDiscarded(item_ids=ids):
                discarded.update(ids)
    return texts, claimed, discarded


async def play(agent: Agent, rng: random.Random) -> list[str]:
    """A random order of sends, steers, cancels and pauses; the texts sent."""
    sent: list[str] = []
    for number in range(rng.randrange(2, 9)):
        match rng.choice(("prompt", "prompt", "steer", "cancel", "keep", "pause", "idle")):
            case "prompt":
                sent.append(f"prompt {number}")
                agent.followup(user_text(sent[-1]))
            case "steer":
                sent.append(f"steer {number}")
                agent.steer(user_text(sent[-1]))
            case "cancel":
                agent.cancel(CancelByUser())
            case "keep":
                agent.cancel(CancelByUser(), keep_inbox=True)
            case "pause":
                for _ in range(rng.randrange(8)):
                    await asyncio.sleep(0)
            case "idle":
                await idle(agent)
    return sent


def check(agent: Agent, sent: list[str], seen: set[str], order: int) -> None:
    assert not agent.inbox.queued, f"order {order}: left waiting"
    assert not agent.inbox.steering, f"order {order}: left steering"
    assert agent.status == "idle", f"order {order}"
    texts, claimed, discarded = account(agent)
    assert sorted(texts.values()) == sorted(sent), f"order {order}: not every send was logged"
    for item_id, text in texts.items():
        assert (item_id in claimed) != (item_id in discarded), f"order {order}: {text!r}"
        if item_id in claimed:
            assert text in seen, f"order {order}: {text!r} was claimed but never sent"
    assert check_log(agent.session.events) == [], f"order {order}"


async def test_no_send_is_lost_in_any_order(
    runtime: tuple[Runtime, Echoing], tmp_path: Path
) -> None:
    started, adapter = runtime
    for order in range(ORDERS):
        rng = random.Random(order)
        adapter.rng = random.Random(order + 1_000_000)
        agent = await new_agent(started, tmp_path)
        sent = await play(agent, rng)
        # Whatever came before, a prompt sent now runs, and wakes whatever a cancel
        # that kept the inbox left waiting.
        sent.append("last")
        agent.followup(user_text("last"))
        await idle(agent)
        check(agent, sent, adapter.seen, order)
        assert "last" in adapter.seen, f"order {order}: the last prompt never ran"
        await agent.dispose()
        adapter.seen.clear()


async def test_a_prompt_sent_as_a_cancelled_turn_ends_runs(
    runtime: tuple[Runtime, Echoing], tmp_path: Path
) -> None:
    """The stream-json driver's pattern: the turn's end is printed, and the next prompt
    arrives while the driver is still storing it (before it looks at the queue)."""
    started, adapter = runtime
    agent = await new_agent(started, tmp_path)
    sent: list[str] = []

    def on_event(event: object) -> None:
        if getattr(event, "type", None) == "turn/end" and not sent:
            # Right after the end is logged (a subscriber may not append itself).
            sent.append("next")
            asyncio.get_running_loop().call_soon(agent.followup, user_text("next"))

    agent.session.subscribe(on_event)
    agent.followup(user_text("first"))
    await asyncio.sleep(0)
    agent.cancel(CancelByUser())
    await idle(agent)
    assert "next" in adapter.seen
    assert not agent.inbox.queued


async def test_a_prompt_sent_by_a_listener_hearing_idle_runs(
    runtime: tuple[Runtime, Echoing], tmp_path: Path
) -> None:
    """A front end that sends its next prompt when it hears the agent is idle (while the
    driver is still saying so) gets it run, and hears "running" after "idle"."""
    started, adapter = runtime
    agent = await new_agent(started, tmp_path)
    heard: list[str] = []

    def on_status(who: object, status: str) -> None:
        heard.append(status)
        if who is agent and status == "idle" and "second" not in adapter.seen and len(heard) < 3:
            agent.followup(user_text("second"))

    started.root.on(AGENT_STATUS, on_status)
    agent.followup(user_text("first"))
    await idle(agent)
    assert "second" in adapter.seen
    assert heard == ["running", "idle", "running", "idle"]
