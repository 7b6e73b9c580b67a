"""The event log of one representative turn, pinned: which events, in which order.

The log is the contract every reader depends on (resume, the UIs, search, request
reconstruction); a change to the loop's code must not change what a turn writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh.llm import PluginSource, user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import APPROVALS, TOOLS
from dsh.session import SessionEvent, check_log
from dsh.session.payloads import CancelByUser
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import Action, ToolContext, ToolDefinition, ToolOutput
from dsh.tools.approval import ApprovalDecision, ApprovalRequest


class Text(BaseModel):
    text: str


async def note(args: Text, context: ToolContext) -> str:
    return f"noted {args.text}"


NOTE = ToolDefinition(
    name="note",
    description="Write a note (asks first).",
    arguments=Text,
    execute=note,
    describe=lambda args, context: Action(
        risk="exec", summary=f"note {args.text}", command=f"note {args.text}"
    ),
)


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
    )
    started.root.get(TOOLS).register("note", NOTE)
    yield started
    await started.aclose()


def shape(events: list[SessionEvent]) -> list[str]:
    """Event types in order, a run of stream chunks as one (how a stream is cut into
    chunks is the transport's business, not the loop's)."""
    out: list[str] = []
    for event in events:
        if event.type == "assistant/chunk" and out and out[-1] == "assistant/chunk…":
            continue
        out.append("assistant/chunk…" if event.type == "assistant/chunk" else event.type)
    return out


async def test_a_turn_with_reasoning_an_approved_call_and_an_answer(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(outcome="allow_once")

    runtime.root.get(APPROVALS).add_approver(approve)
    fake_llm.add(
        Reply(
            reasoning="A note is asked for.",
            tool_calls=[ToolCallSpec(name="note", arguments={"text": "milk"})],
        )
    )
    fake_llm.add(Reply(reasoning="Done; say so.", text="Noted: milk."))
    agent = await runtime.agents.create(tmp_path)
    opened = len(agent.session.events)
    agent.followup(user_text("note milk"))
    await agent.when_idle()

    events = agent.session.events[opened:]
    assert shape(events) == [
        "inbox/enqueued",
        "inbox/claimed",
        "turn/start",
        "step/start",
        "user/message",
        "user/message",
        "request/header",
        "request/context",
        "assistant/chunk…",
        "assistant/message",
        "tool/call",
        "approval/requested",
        "approval/resolved",
        "checkpoint/taken",  # the workspace, before the approved call's effects
        "tool/result",
        "step/end",
        "step/start",
        "request/header",
        "assistant/chunk…",
        "assistant/message",
        "step/end",
        "checkpoint/taken",  # the turn's end: what it changed
        "turn/end",
    ]
    by_type = {e.type: e.data for e in events}
    context, prompt = (e.data for e in events if e.type == "user/message")
    assert isinstance(context.source, PluginSource)  # the environment plugin's facts
    assert prompt.text() == "note milk"  # the person's words last
    assert by_type["turn/start"].turn == 1
    assert [e.data.reason for e in events if e.type == "request/header"] == ["initial", "repeat"]
    assert [(e.data.turn, e.data.step) for e in events if e.type == "step/end"] == [(1, 1), (1, 2)]
    assert (by_type["approval/resolved"].outcome, by_type["approval/resolved"].by) == (
        "allow-once",
        "user",
    )
    assert by_type["tool/result"].message.result.content[0].text == "noted milk"
    assert by_type["turn/end"].reason.kind == "completed"
    assert check_log(agent.session.events) == []


async def test_steering_and_tool_context_join_the_next_step(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await runtime.agents.create(tmp_path)

    async def approve_and_steer(request: ApprovalRequest) -> ApprovalDecision:
        assert agent.try_steer(user_text("and eggs"))
        return ApprovalDecision(outcome="allow_once")

    async def note_with_context(args: Text, context: ToolContext) -> ToolOutput:
        return ToolOutput(
            content=f"noted {args.text}", additional_contexts=(user_text("the list: milk"),)
        )

    runtime.root.get(TOOLS).register(
        "listed", dataclasses.replace(NOTE, name="listed", execute=note_with_context)
    )
    runtime.root.get(APPROVALS).add_approver(approve_and_steer)
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="listed", arguments={"text": "milk"})]))
    fake_llm.add(Reply(text="Noted milk; eggs too."))
    opened = len(agent.session.events)
    agent.followup(user_text("note milk"))
    await agent.when_idle()

    events = agent.session.events[opened:]
    assert shape(events) == [
        "inbox/enqueued",
        "inbox/claimed",
        "turn/start",
        "step/start",
        "user/message",
        "user/message",
        "request/header",
        "request/context",
        "assistant/chunk…",
        "assistant/message",
        "tool/call",
        "approval/requested",
        "inbox/enqueued",  # steered while the person was asked
        "approval/resolved",
        "checkpoint/taken",  # the workspace, before the approved call's effects
        "tool/result",
        "step/end",
        "inbox/claimed",  # the steering, claimed for the next step
        "step/start",
        "steering/message",
        "user/message",  # the tool's context, after the person's words
        "request/header",
        "assistant/chunk…",
        "assistant/message",
        "step/end",
        "checkpoint/taken",  # the turn's end: what it changed
        "turn/end",
    ]
    steering, context = [e.data for e in events if e.type in ("steering/message", "user/message")][
        -2:
    ]
    assert (steering.text(), context.text()) == ("and eggs", "the list: milk")
    assert [e.data.reason for e in events if e.type == "request/header"] == ["initial", "repeat"]
    assert check_log(agent.session.events) == []


async def test_a_cancel_while_asking_ends_the_turn_aborted(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    agent = await runtime.agents.create(tmp_path)

    async def cancel(request: ApprovalRequest) -> ApprovalDecision:
        agent.cancel(CancelByUser())
        return ApprovalDecision(outcome="allow_once")

    runtime.root.get(APPROVALS).add_approver(cancel)
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="note", arguments={"text": "milk"}),
                ToolCallSpec(name="note", arguments={"text": "eggs"}),
            ]
        )
    )
    opened = len(agent.session.events)
    agent.followup(user_text("note milk and eggs"))
    agent.followup(user_text("then bread"))
    await agent.when_idle()

    events = agent.session.events[opened:]
    assert shape(events) == [
        "inbox/enqueued",
        "inbox/enqueued",
        "inbox/claimed",
        "turn/start",
        "step/start",
        "user/message",
        "user/message",
        "request/header",
        "request/context",
        "assistant/chunk…",
        "assistant/message",
        "tool/call",
        "approval/requested",
        "inbox/discarded",  # the cancel clears what waited
        "approval/resolved",
        "tool/result",
        "tool/call",  # the second call, answered without running
        "tool/result",
        "step/end",
        "user/message",  # what the next request tells the model: the user interrupted
        "turn/end",
    ]
    by_type = {e.type: e.data for e in events}
    assert by_type["inbox/discarded"].reason == "cancelled"
    note = by_type["user/message"].text()
    assert note.startswith("[The user interrupted this turn.")
    assert "Not run: note, note." in note
    # The call allowed in the instant of the cancel does not run either.
    first, second = [e.data for e in events if e.type == "tool/result"]
    assert first.error is not None, first
    assert "noted" not in str(first)
    assert by_type["approval/resolved"].outcome == "deny"
    assert second.error.code == "ABORTED_BEFORE_DISPATCH"
    ended = by_type["turn/end"].reason
    assert (ended.kind, ended.reason.kind) == ("aborted", "user")
    assert check_log(agent.session.events) == []


async def test_the_permission_mode_is_logged_at_each_turn_and_each_change(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """``turn/start`` names the mode the turn starts in; a change while the session
    holds something is logged when it happens (``permissions/mode``), one before the
    first event is not (the session stays unwritten; its first turn says the mode)."""
    approvals = runtime.root.get(APPROVALS)
    agent = await runtime.agents.create(tmp_path)
    approvals.mode = "plan"  # nothing logged yet: the session stays empty
    assert len(agent.session.events) == 0
    fake_llm.add(Reply(text="Planned."), Reply(text="Done."))
    agent.followup(user_text("plan it"))
    await agent.when_idle()
    approvals.mode = "accept-edits"
    agent.followup(user_text("now do it"))
    await agent.when_idle()

    logged = [
        (e.type, e.data.mode)
        for e in agent.session.events
        if e.type in ("turn/start", "permissions/mode")
    ]
    assert logged == [
        ("turn/start", "plan"),
        ("permissions/mode", "accept-edits"),
        ("turn/start", "accept-edits"),
    ]
    assert check_log(agent.session.events) == []


async def test_a_change_of_options_is_logged_with_what_changed(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """``agent/options`` holds each option that changed, when it changed: none before
    the session holds anything (its first ``request/header`` says them), none for a
    "change" to the value already set; and the next request is built with them."""
    agent = await runtime.agents.create(tmp_path)
    agent.set_options(reasoning_effort="low")
    assert len(agent.session.events) == 0
    fake_llm.add(Reply(text="Flash."), Reply(text="Pro."))
    agent.followup(user_text("one"))
    await agent.when_idle()
    agent.set_options(model=agent.options.model, provider=agent.options.provider)
    agent.set_options(model="deepseek-pro", reasoning_effort="low", max_steps=4)
    agent.followup(user_text("two"))
    await agent.when_idle()

    logged = [e.data.changes for e in agent.session.events if e.type == "agent/options"]
    assert logged == [{"model": "deepseek-pro", "max_steps": 4}]
    assert [r.body["model"] for r in fake_llm.chat_requests] == ["deepseek-flash", "deepseek-pro"]
    assert check_log(agent.session.events) == []
