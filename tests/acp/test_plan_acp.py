"""Plan mode in an editor: the plan asked as ``session/request_permission`` on the plan
tool's call, and the modes dsh switches to told as ``current_mode_update``."""

from __future__ import annotations

import asyncio
import json

from acp.schema import (
    AllowedOutcome,
    ContentToolCallContent,
    CurrentModeUpdate,
    DeniedOutcome,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallStart,
)

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.plan_review import PlanDecision
from dsh.ui.acp.permissions import plan_decision, plan_options
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh

PLAN = "# Add a notes file\n\n1. Write `notes.md` with one line.\n\nRisk: none, it is new.\n"


def picked(option_id: str) -> RequestPermissionResponse:
    return RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id=option_id)
    )


def test_the_three_answers_are_offered_in_order_with_their_kinds() -> None:
    assert [(o.option_id, o.name, o.kind) for o in plan_options()] == [
        ("accept-edits", "Yes, and accept edits", "allow_always"),
        ("default", "Yes, and ask as usual", "allow_once"),
        ("keep-planning", "No, keep planning", "reject_once"),
    ]


def test_the_editors_answer_is_the_decision() -> None:
    assert plan_decision(picked("accept-edits")) == PlanDecision(outcome="accept-edits")
    assert plan_decision(picked("default")) == PlanDecision(outcome="default")
    assert plan_decision(picked("keep-planning")) == PlanDecision(outcome="keep-planning")
    cancelled = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    assert plan_decision(cancelled).outcome == "cancelled"
    # An option dsh never offered approves nothing.
    assert plan_decision(picked("allow-once")) == PlanDecision(outcome="keep-planning")
    assert plan_decision(picked("bypass")) == PlanDecision(outcome="keep-planning")


def present(plan: str) -> Reply:
    return Reply(
        tool_calls=[ToolCallSpec(name="exit_plan_mode", arguments=json.dumps({"plan": plan}))]
    )


def write(path: str, content: str) -> Reply:
    arguments = json.dumps({"file_path": path, "content": content})
    return Reply(tool_calls=[ToolCallSpec(name="write", arguments=arguments)])


def tool_results(server: FakeLLM, request: int) -> list[str]:
    messages = server.chat_requests[request].body["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


def modes_said(editor: Editor) -> list[str]:
    return [u.current_mode_id for u in editor.updates if isinstance(u, CurrentModeUpdate)]


async def test_an_approved_plan_switches_to_accept_edits_and_the_next_write_runs_unasked(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    notes = dsh.project / "notes.md"
    fake_llm.add(
        write("notes.md", "too soon\n"),  # refused: plan mode
        present(PLAN),
        write("notes.md", "hello\n"),
        Reply(text="The notes file is written."),
    )
    editor = Editor(answers=["accept-edits"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        reply = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=text("add a notes file")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
    # Asked once, on the plan tool's call: the plan as its content, the three answers.
    [asked] = editor.asked
    [presented] = [c for c in editor.tool_calls() if c.title == "Plan"]
    assert asked.tool_call.tool_call_id == presented.tool_call_id
    assert asked.tool_call.kind == "switch_mode"
    [content] = asked.tool_call.content or []
    assert isinstance(content, ContentToolCallContent)
    assert isinstance(content.content, TextContentBlock)
    assert content.content.text == PLAN
    assert [(o.option_id, o.name) for o in asked.options] == [
        ("accept-edits", "Yes, and accept edits"),
        ("default", "Yes, and ask as usual"),
        ("keep-planning", "No, keep planning"),
    ]
    # The editor's own set_mode is not echoed; dsh's switch is said, during the turn,
    # before the write it lets run.
    assert modes_said(editor) == ["accept-edits"]
    switched = next(i for i, u in enumerate(editor.updates) if isinstance(u, CurrentModeUpdate))
    writes = [
        i for i, u in enumerate(editor.updates) if isinstance(u, ToolCallStart) and u.kind == "edit"
    ]
    assert len(writes) == 2
    assert writes[0] < switched < writes[1]
    assert notes.read_text() == "hello\n"
    refused, approved = tool_results(fake_llm, 2)
    assert "plan mode" in refused
    assert approved.startswith("The user approved your plan. Permission mode is now accept-edits")
    events = await dsh.checked_events(sid)
    [reviewed] = [e for e in events if e.type == "plan/reviewed"]
    assert (reviewed.data.outcome, reviewed.data.mode) == ("accept-edits", "accept-edits")


async def test_keep_planning_sends_the_plan_back_and_the_mode_stays_plan(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(present(PLAN), Reply(text="I will revise the plan."))
    editor = Editor(answers=["keep-planning"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        # /plan with a prompt: the mode dsh switched to is said, then the turn runs.
        reply = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=text("/plan add a notes file")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
        assert "I will revise the plan." in editor.text()
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/permissions")), TIMEOUT)
        assert "Permission mode: plan" in editor.text()
    assert len(editor.asked) == 1
    assert modes_said(editor) == ["plan"]
    [sent_back] = tool_results(fake_llm, 1)
    assert sent_back.startswith("The user wants you to keep planning. Stay in plan mode")
    assert fake_llm.chat_requests[0].body["messages"][-1]["content"] == "add a notes file"
    assert not (dsh.project / "notes.md").exists()


async def test_a_cancelled_review_approves_nothing(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(present(PLAN), write("notes.md", "never\n"), Reply(text="never"))
    editor = Editor(answers=["hold"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("add notes")))
        await editor.wait_for(lambda: editor.asked)
        await conn.cancel(session_id=sid)
        editor.release_cancelled()
        reply = await asyncio.wait_for(prompt, TIMEOUT)
        assert reply.stop_reason == "cancelled"
    assert modes_said(editor) == []
    assert not (dsh.project / "notes.md").exists()
    assert len(fake_llm.chat_requests) == 1
    events = await dsh.checked_events(sid)
    [reviewed] = [e for e in events if e.type == "plan/reviewed"]
    assert reviewed.data.outcome == "cancelled"
    assert reviewed.data.mode is None
