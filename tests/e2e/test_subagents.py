"""Subagents through the real binary: ``dsh -p`` against the scripted server, the
children's requests told apart by a marker in their prompts (``Reply.when``)."""

from __future__ import annotations

import asyncio
from typing import Any

from dsh.session import SessionHeader, SessionStore
from dsh.testing import FakeLLM, Reply, ToolCallSpec, Usage
from tests.e2e.harness import (
    Dsh,
    close_stdin,
    finish,
    interrupt,
    of_type,
    send,
    stream_events,
    text_of,
)
from tests.e2e.test_user_hooks import configure, hook_table, records
from tests.support.waits import HANG_S

USAGE = Usage(prompt_tokens=100, completion_tokens=10)


def task(description: str, prompt: str, **extra: str) -> ToolCallSpec:
    return ToolCallSpec(
        name="task", arguments={"description": description, "prompt": prompt, **extra}
    )


async def headers(dsh: Dsh) -> dict[str, SessionHeader]:
    store = SessionStore.at(dsh.home)
    try:
        return {h.id: h for h in await store.persistence.list()}
    finally:
        await store.aclose()


async def test_three_parallel_subagents_answer_the_parent(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(
            tool_calls=[
                task("count the apples", "MARK-A: count the apples"),
                task("count the pears", "MARK-B: count the pears"),
                task("count the plums", "MARK-C: count the plums"),
            ],
            usage=USAGE,
        ),
        Reply(text="seven apples", when="MARK-A", usage=USAGE),
        Reply(text="eight pears", when="MARK-B", usage=USAGE),
        Reply(text="nine plums", when="MARK-C", usage=USAGE),
        Reply(text="24 fruits in all.", usage=USAGE),
    )
    done = await dsh.run("-p", "count the fruit", "--output-format", "json")
    assert done.code == 0, done.stderr[-3000:]
    [result] = done.json_lines()
    assert result["result"] == "24 fruits in all."
    final = fake_llm.chat_requests[-1].body
    tool_texts = [text_of(m) for m in final["messages"] if m["role"] == "tool"]
    assert tool_texts == ["seven apples", "eight pears", "nine plums"]
    # Each child asked once, with its prompt as its first message, and side by side:
    # all three requests were in before any parent request after the first.
    child_requests = [r for r in fake_llm.chat_requests[1:4]]
    assert sorted(text_of(r.body["messages"][-1])[:6] for r in child_requests) == [
        "MARK-A",
        "MARK-B",
        "MARK-C",
    ]
    stored = await headers(dsh)
    parents = [h for h in stored.values() if h.origin is None]
    children = [h for h in stored.values() if h.origin == "subagent"]
    assert len(parents) == 1
    assert len(children) == 3
    parent = parents[0]
    for child in children:
        assert child.parent_session == parent.id
        assert child.delegation_depth == 1
    results = of_type(await dsh.events(parent.id), "tool/result")
    sessions = {r.data.meta["session"] for r in results}
    assert sessions == {c.id for c in children}
    # Each child is a session of its own that names its parent, and the parent's lists them.
    shown = await dsh.run("sessions", "show", children[0].id)
    assert shown.code == 0, shown.stderr
    assert f"- Subagent of: `{parent.id}` (depth 1)" in shown.stdout
    assert "seven apples" in shown.stdout or "eight pears" in shown.stdout or "nine" in shown.stdout
    shown = await dsh.run("sessions", "show", parent.id)
    assert shown.code == 0, shown.stderr
    for child in children:
        assert f"- Started from it: `{child.id}`" in shown.stdout
    listed = await dsh.run("sessions", "list")
    assert listed.stdout.count(f"(from {parent.id[:8]})") == 3
    # What the children spent counts in the parent's: five calls of 100 + 10 tokens.
    assert result["usage"]["inputTokens"] == 500
    assert result["usage"]["outputTokens"] == 50


async def test_a_cancelled_parent_cancels_its_child(dsh: Dsh, fake_llm: FakeLLM) -> None:
    story = " ".join(f"word{i}" for i in range(500))  # streamed for far longer than the test
    fake_llm.add(
        Reply(tool_calls=[task("tell a story", "MARK-S: tell a long story")]),
        Reply(text=story, chunk_size=4, chunk_delay_ms=20, when="MARK-S"),
    )
    child = await dsh.start("-p", "delegate a story")
    async with asyncio.timeout(HANG_S):
        # The subagent's request is streaming; the server offers no event to await.
        while len(fake_llm.chat_requests) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    interrupt(child)
    done = await finish(child)
    assert done.code == 130, done.stderr[-3000:]
    stored = await headers(dsh)
    [parent] = [h for h in stored.values() if h.origin is None]
    [sub] = [h for h in stored.values() if h.origin == "subagent"]
    child_ends = of_type(await dsh.events(sub.id), "turn/end")
    assert [e.data.reason.kind for e in child_ends] == ["aborted"]
    assert child_ends[0].data.reason.reason.kind == "parent"
    parent_ends = of_type(await dsh.events(parent.id), "turn/end")
    assert [e.data.reason.kind for e in parent_ends] == ["aborted"]
    assert len(fake_llm.chat_requests) == 2  # nothing asked after the cancel


async def test_a_subagent_stop_hook_runs_for_the_child_and_stop_for_the_parent(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    stop, sub_stop = dsh.root / "stop.jsonl", dsh.root / "subagent-stop.jsonl"
    start = dsh.root / "start.jsonl"
    configure(
        dsh,
        hook_table("Stop", stop, "ok"),
        hook_table("SubagentStop", sub_stop, "stop-once"),
        hook_table("SessionStart", start, "ok"),
    )
    fake_llm.add(
        Reply(tool_calls=[task("greet", "MARK-G: say hello")]),
        Reply(text="Hello.", when="MARK-G"),
        Reply(text="Hello and goodbye.", when="MARK-G"),
        Reply(text="Done."),
    )
    done = await dsh.run("-p", "delegate a greeting")
    assert done.code == 0, done.stderr[-3000:]
    ran = records(sub_stop)
    assert [p["stop_hook_active"] for p in ran] == [False, True]  # it kept the child going once
    assert {p["hook_event_name"] for p in ran} == {"SubagentStop"}
    parent_id = next(p["session_id"] for p in records(stop))
    assert ran[0]["parent_session_id"] == parent_id
    assert ran[0]["agent_type"] == "general-purpose"
    assert ran[0]["agent_id"] == ran[0]["session_id"] != parent_id
    assert [p["hook_event_name"] for p in records(stop)] == ["Stop"]  # the parent's alone
    assert [p["session_id"] for p in records(start)] == [parent_id]  # no SessionStart for a child
    final = fake_llm.chat_requests[-1].body
    assert [text_of(m) for m in final["messages"] if m["role"] == "tool"] == ["Hello and goodbye."]


async def test_a_childs_approval_reaches_a_headless_driver_and_a_denial_runs_nothing(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    target = dsh.project / "created"
    fake_llm.add(
        Reply(tool_calls=[task("make a folder", "MARK-M: make it")]),
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="bash", arguments={"command": f"mkdir {target}", "description": "mk"}
                )
            ],
            when="MARK-M",
        ),
        Reply(text="I was not allowed.", when="MARK-M"),
        Reply(text="The child could not."),
    )
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "delegate"})
    request: dict[str, Any] | None = None
    async for line in stream_events(child):
        if line.get("type") == "approval-request":
            request = line
            break
    assert request is not None
    assert request["agentLabel"] == "make a folder"
    assert request["summary"] == f"mkdir {target}"
    await send(child, {"type": "approval", "requestId": request["requestId"], "outcome": "deny"})
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr[-3000:]
    assert not target.exists()
    final = fake_llm.chat_requests[-1].body
    assert [text_of(m) for m in final["messages"] if m["role"] == "tool"] == ["I was not allowed."]
