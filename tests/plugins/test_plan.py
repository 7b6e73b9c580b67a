"""The plan plugin in process: ``exit_plan_mode`` through a real runtime and agent, the
real approvals service asking a reviewer registered here, the scripted server as the
model. What the model reads, what is logged, and the mode the turn goes on in."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent
from dsh.commands import CommandContext
from dsh.hooks import PERMISSION_MODE_CHANGED
from dsh.llm import user_text
from dsh.permission_modes import PLAN_MODE_TEXT, PermissionMode
from dsh.prompt import PromptContext
from dsh.runtime import Runtime, start_runtime
from dsh.services import APPROVALS, COMMANDS, PROMPT
from dsh.session import SessionEvent
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import CallResult, TextView
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh_plugins.plan import SECTION, present_call, present_result, result_title
from dsh_plugins.plan.saving import slug, write_plan
from tests.support.command_host import RecordingHost
from tests.support.waits import HANG_S

PLAN = "# Add a greeting\n\n1. Write `hello.txt` with a greeting.\n\nRisk: none."


def present(plan: str = PLAN) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="exit_plan_mode", arguments={"plan": plan})])


def write(name: str, content: str = "hello\n") -> Reply:
    return Reply(
        tool_calls=[ToolCallSpec(name="write", arguments={"file_path": name, "content": content})]
    )


def tool_texts(server: FakeLLM, request: int = -1) -> list[str]:
    return [
        str(m["content"])
        for m in server.chat_requests[request].body["messages"]
        if m["role"] == "tool"
    ]


def of(agent: Agent, kind: str) -> list[SessionEvent]:
    return [e for e in agent.session.events if e.type == kind]


async def start(
    tmp_path: Path,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    mode: PermissionMode = "plan",
    disabled: tuple[str, ...] = ("title",),
    plan: dict[str, Any] | None = None,
) -> Runtime:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    configs: dict[str, Any] = {"llm-deepseek": {"base_url": fake_llm.base_url}}
    if plan is not None:
        configs["plan"] = plan
    return await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs=configs,
        disabled_plugins=disabled,
        permission_mode=mode,
    )


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    started = await start(tmp_path, fake_llm, monkeypatch)
    yield started
    await started.aclose()


async def turn(runtime: Runtime, cwd: Path, prompt: str = "plan it") -> Agent:
    agent = await runtime.agents.create(cwd)
    agent.followup(user_text(prompt))
    await asyncio.wait_for(agent.when_idle(), HANG_S)
    return agent


class Reviewer:
    """Answers every plan with ``decision``, keeping what it was shown."""

    def __init__(self, runtime: Runtime, decision: PlanDecision) -> None:
        self.decision = decision
        self.reviews: list[PlanReview] = []
        runtime.root.get(APPROVALS).add_plan_reviewer(self)

    async def __call__(self, review: PlanReview) -> PlanDecision:
        self.reviews.append(review)
        return self.decision


def asked_approvals(runtime: Runtime) -> list[ApprovalRequest]:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(outcome="allow_once")

    runtime.root.get(APPROVALS).add_approver(approve)
    return asked


async def test_an_approved_plan_is_carried_out_in_accept_edits_in_the_same_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    reviewer = Reviewer(runtime, PlanDecision(outcome="accept-edits", note="keep it short"))
    asked = asked_approvals(runtime)
    heard: list[PermissionMode] = []
    runtime.root.on(PERMISSION_MODE_CHANGED, heard.append)
    fake_llm.add(present(), write("hello.txt"), Reply(text="Done."))
    agent = await turn(runtime, tmp_path)

    [review] = reviewer.reviews
    call, written = of(agent, "tool/call")
    assert written.data.name == "write"
    assert (review.plan, review.call_id, review.session_id) == (PLAN, call.data.call_id, agent.id)
    assert review.agent_label is None
    assert tool_texts(fake_llm, 1) == [
        "The user approved your plan. Permission mode is now accept-edits: carry it out "
        "now, step by step. Their note: keep it short"
    ]
    # The write ran unasked, in the same turn.
    assert (tmp_path / "hello.txt").read_text() == "hello\n"
    assert asked == []
    assert len(of(agent, "turn/end")) == 1
    assert runtime.root.get(APPROVALS).mode == "accept-edits"
    assert heard == ["accept-edits"]
    [proposed] = of(agent, "plan/proposed")
    [reviewed] = of(agent, "plan/reviewed")
    assert (proposed.data.plan, proposed.data.call_id) == (PLAN, call.data.call_id)
    assert reviewed.data.review_id == proposed.data.review_id
    assert (reviewed.data.outcome, reviewed.data.by, reviewed.data.mode, reviewed.data.note) == (
        "accept-edits",
        "user",
        "accept-edits",
        "keep it short",
    )
    result = of(agent, "tool/result")[0].data
    assert result.error is None


async def test_approved_as_usual_the_next_write_is_asked(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    Reviewer(runtime, PlanDecision(outcome="default"))
    asked = asked_approvals(runtime)
    fake_llm.add(present(), write("hello.txt"), Reply(text="Done."))
    agent = await turn(runtime, tmp_path)
    assert tool_texts(fake_llm, 1) == [
        "The user approved your plan. Permission mode is now default: carry it out now, "
        "step by step."
    ]
    assert [request.tool_name for request in asked] == ["write"]
    assert (tmp_path / "hello.txt").exists()
    assert runtime.root.get(APPROVALS).mode == "default"
    [reviewed] = of(agent, "plan/reviewed")
    assert (reviewed.data.outcome, reviewed.data.mode) == ("default", "default")


async def test_keep_planning_sends_the_note_back_and_nothing_runs(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    Reviewer(runtime, PlanDecision(outcome="keep-planning", note="use a template instead"))
    fake_llm.add(present(), write("hello.txt"), Reply(text="Revising."))
    agent = await turn(runtime, tmp_path)
    assert tool_texts(fake_llm, 1) == [
        "The user wants you to keep planning. Their note: use a template instead. Stay in "
        "plan mode: revise the plan and present it again with exit_plan_mode."
    ]
    assert not of(agent, "tool/result")[0].data.error  # an answer, not an error
    refused = tool_texts(fake_llm, 2)[-1]
    assert "plan mode" in refused
    assert not (tmp_path / "hello.txt").exists()
    assert runtime.root.get(APPROVALS).mode == "plan"
    [reviewed] = of(agent, "plan/reviewed")
    assert (reviewed.data.outcome, reviewed.data.mode, reviewed.data.note) == (
        "keep-planning",
        None,
        "use a template instead",
    )


async def test_with_nobody_to_review_the_model_is_told_to_end_its_turn(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(present(), Reply(text=""))
    agent = await turn(runtime, tmp_path)
    assert tool_texts(fake_llm) == [
        "Nobody can approve plans here (dsh runs headless); the plan is recorded as this "
        "run's result. End your turn now: do not repeat the plan and do not start carrying "
        "it out."
    ]
    [reviewed] = of(agent, "plan/reviewed")
    assert (reviewed.data.outcome, reviewed.data.by) == ("unavailable", "headless")
    assert runtime.root.get(APPROVALS).mode == "plan"


async def test_outside_plan_mode_there_is_nothing_to_approve(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await start(tmp_path, fake_llm, monkeypatch, mode="default")
    try:
        reviewer = Reviewer(runtime, PlanDecision(outcome="accept-edits"))
        fake_llm.add(present(), Reply(text="Going on."))
        agent = await turn(runtime, tmp_path)
        assert runtime.root.get(APPROVALS).mode == "default"
    finally:
        await runtime.aclose()
    [text] = tool_texts(fake_llm)
    assert text == (
        "Error: you are not in plan mode (the permission mode is default): there is nothing "
        "to approve; go on within the current permissions"
    )
    assert reviewer.reviews == []
    assert of(agent, "plan/proposed") == []


async def test_a_cancelled_turn_takes_the_review_away(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    opened = asyncio.Event()
    closed: list[bool] = []

    async def never_answers(review: PlanReview) -> PlanDecision:
        opened.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            closed.append(True)  # the dialog goes away with the turn
            raise
        raise AssertionError("unreachable")

    runtime.root.get(APPROVALS).add_plan_reviewer(never_answers)
    fake_llm.add(present())
    agent = await runtime.agents.create(tmp_path)
    agent.followup(user_text("plan it"))
    await asyncio.wait_for(opened.wait(), HANG_S)
    from dsh.session.payloads import CancelByUser

    agent.cancel(CancelByUser())
    await asyncio.wait_for(agent.when_idle(), HANG_S)
    assert closed == [True]
    # Proposed, then reviewed: cancelled (the call was cancelled under the review).
    [proposed] = of(agent, "plan/proposed")
    [reviewed] = of(agent, "plan/reviewed")
    assert (reviewed.data.review_id, reviewed.data.outcome, reviewed.data.mode) == (
        proposed.data.review_id,
        "cancelled",
        None,
    )
    [result] = of(agent, "tool/result")
    assert result.data.error is not None
    assert runtime.root.get(APPROVALS).mode == "plan"
    [end] = of(agent, "turn/end")
    assert end.data.reason.kind == "aborted"


async def test_a_subagent_returns_its_plan_as_its_answer(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    reviewer = Reviewer(runtime, PlanDecision(outcome="accept-edits"))
    task = {"description": "plan the greeting", "prompt": "MARK-P: plan it"}
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="task", arguments=task)]),
        Reply(
            tool_calls=[ToolCallSpec(name="exit_plan_mode", arguments={"plan": PLAN})],
            when="MARK-P",
        ),
        Reply(text=PLAN, when="MARK-P"),
        Reply(text="The child planned."),
    )
    agent = await turn(runtime, tmp_path)
    refusal = next(m for m in fake_llm.chat_requests[2].body["messages"] if m["role"] == "tool")
    assert refusal["content"] == "Error: you run as a subagent: return your plan as your answer"
    assert reviewer.reviews == []
    assert runtime.root.get(APPROVALS).mode == "plan"
    [result] = of(agent, "tool/result")
    assert result.data.error is None  # the delegation itself ran in plan mode
    assert PLAN in tool_texts(fake_llm)[0]


async def test_the_prompt_names_the_tool_only_in_plan_mode(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def system(runtime: Runtime) -> str:
        pc = PromptContext(agent=None, scope=None, cwd=tmp_path, provider="p", model="m")
        return (await runtime.root.get(PROMPT).assemble(pc)).system

    with_plugin = await start(tmp_path, fake_llm, monkeypatch, mode="default")
    without = await start(
        tmp_path, fake_llm, monkeypatch, mode="default", disabled=("title", "plan")
    )
    try:
        default = await system(with_plugin)
        # Byte-identical outside plan mode, with the plugin loaded or not.
        assert default == await system(without)
        assert "exit_plan_mode" not in default
        approvals = with_plugin.root.get(APPROVALS)
        approvals.mode = "plan"
        planning = await system(with_plugin)
        assert planning.startswith(default)  # the cached prefix stays
        assert planning.endswith(f"{PLAN_MODE_TEXT}\n\n{SECTION}")
        assert "exit_plan_mode" in planning
        approvals.mode = "accept-edits"
        assert await system(with_plugin) == default
    finally:
        await with_plugin.aclose()
        await without.aclose()


def test_the_card_shows_the_plan_as_markdown_titled_by_its_outcome() -> None:
    arguments = {"plan": PLAN}
    assert present_call(arguments) == TextView(title="Plan", body=PLAN, language="markdown")

    def title(meta: dict[str, Any] | None, **result: Any) -> str:
        return result_title(CallResult(text=result.pop("text", ""), meta=meta, **result))

    assert title({"outcome": "accept-edits"}) == "Plan approved · accept-edits"
    assert title({"outcome": "default"}) == "Plan approved · default"
    assert title({"outcome": "keep-planning", "note": "smaller\nsteps"}) == (
        "Plan sent back: smaller…"
    )
    assert title({"outcome": "keep-planning", "note": None}) == "Plan sent back"
    assert title({"outcome": "unavailable"}) == "Plan not reviewed (headless)"
    assert title(None, text="cancelled", is_error=True, error_code="ASK_ABORTED") == (
        "Plan not reviewed: the turn was cancelled"
    )
    view = present_result(arguments, CallResult(text="", meta={"outcome": "default"}))
    assert view == TextView(title="Plan approved · default", body=PLAN, language="markdown")


async def test_slash_plan_enters_plan_mode_and_sends_its_prompt(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await start(tmp_path, fake_llm, monkeypatch, mode="accept-edits")
    try:
        heard: list[PermissionMode] = []
        runtime.root.on(PERMISSION_MODE_CHANGED, heard.append)
        agent = await runtime.agents.create(tmp_path)
        host = RecordingHost()
        context = CommandContext(agent=agent, root=runtime.root, host=host)
        commands = runtime.root.get(COMMANDS)
        fake_llm.add(write("hello.txt"), Reply(text="I can only plan."))

        assert await commands.run("/plan add a greeting", context)
        await asyncio.wait_for(agent.when_idle(), HANG_S)
        assert heard == ["plan"]
        assert runtime.root.get(APPROVALS).mode == "plan"
        assert host.texts == [
            "Plan mode: the model reads and proposes a plan; nothing is changed until you "
            "approve it."
        ]
        # The prompt went as the person's message, and its turn ran in plan mode.
        prompts = [e.data.text() for e in of(agent, "user/message")]
        assert prompts.count("add a greeting") == 1
        assert "plan mode" in tool_texts(fake_llm)[0]
        assert not (tmp_path / "hello.txt").exists()
        assert "exit_plan_mode" in str(fake_llm.chat_requests[0].body["messages"][0]["content"])

        # Again, with no prompt: it says so, and nothing else happens.
        assert await commands.run("/plan", context)
        assert host.texts[-1] == (
            "Already in plan mode: the model reads and proposes a plan; nothing is changed "
            "until you approve it."
        )
        assert heard == ["plan"]
        assert len(fake_llm.chat_requests) == 2
        # Recorded as any command is.
        done = [e.data.kind for e in of(agent, "command/done")]
        assert done == ["success", "success"]

        # From another mode with no prompt: the mode alone, no turn.
        runtime.root.get(APPROVALS).mode = "default"
        assert await commands.run("/plan", context)
        assert runtime.root.get(APPROVALS).mode == "plan"
        assert heard == ["plan", "default", "plan"]
        assert len(fake_llm.chat_requests) == 2
    finally:
        await runtime.aclose()


async def test_each_proposed_plan_is_saved_to_a_new_file(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    runtime = await start(project, fake_llm, monkeypatch, plan={"directory": "docs/plans"})
    try:
        Reviewer(runtime, PlanDecision(outcome="keep-planning", note="again"))
        fake_llm.add(present(), present(), Reply(text="Revised twice."))
        agent = await turn(runtime, project)
    finally:
        await runtime.aclose()
    # Relative to the project, one file per proposal, none overwritten.
    folder = project / "docs" / "plans"
    first, second = (Path(r.data.meta["saved"]) for r in of(agent, "tool/result"))
    assert sorted(folder.iterdir()) == sorted([first, second])
    assert first.name.endswith("-add-a-greeting.md")
    assert first.read_text() == second.read_text() == PLAN + "\n"
    texts = [
        str(m["content"])
        for m in fake_llm.chat_requests[-1].body["messages"]
        if m["role"] == "tool"
    ]
    assert [text.rsplit("\n\n", 1)[1] for text in texts] == [
        f"The plan was saved to {first}.",
        f"The plan was saved to {second}.",
    ]


async def test_a_plan_that_cannot_be_saved_is_still_reviewed_and_said(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plans").write_text("a file where the folder should be\n")
    runtime = await start(
        tmp_path, fake_llm, monkeypatch, plan={"directory": str(tmp_path / "plans")}
    )
    try:
        reviewer = Reviewer(runtime, PlanDecision(outcome="default"))
        fake_llm.add(present(), Reply(text="Carrying it out."))
        agent = await turn(runtime, tmp_path)
    finally:
        await runtime.aclose()
    assert len(reviewer.reviews) == 1
    [text] = tool_texts(fake_llm)
    assert text.startswith("The user approved your plan.")
    assert text.endswith(
        f"The plan could not be saved to {tmp_path / 'plans'}: File exists (it is kept in the session log)."
    )
    [proposed] = of(agent, "plan/proposed")
    assert proposed.data.plan == PLAN


def test_plan_files_are_named_by_their_heading_and_never_replace_one(tmp_path: Path) -> None:
    assert slug("# Add a *greeting* to the CLI!\n\nsteps") == "add-a-greeting-to-the-cli"
    assert slug("\n  Refactor: split app.py\nmore") == "refactor-split-app-py"
    assert slug("## ünïcode only") == "n-code-only"
    assert slug("###\n") == "plan"
    assert len(slug("# " + "word " * 40)) <= 48
    when = datetime(2026, 12, 5, 13, 15, 35)
    first = write_plan("# Same", tmp_path / "made", when)
    assert first.name == "2026-12-05-131535-same.md"
    # A link planted under the next name is neither followed nor replaced.
    target = tmp_path / "target"
    target.write_text("keep\n")
    os.symlink(target, tmp_path / "made" / "2026-12-05-131535-same-2.md")
    third = write_plan("# Same", tmp_path / "made", when)
    assert third.name == "2026-12-05-131535-same-3.md"
    assert target.read_text() == "keep\n"
    assert first.read_text() == third.read_text() == "# Same\n"
