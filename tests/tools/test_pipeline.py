"""The guarded pipeline, approvals, questions and todo_write, through a real agent."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.agent import Agent
from dsh.hooks import APPROVAL_ASK, TOOL_ANSWER, TOOL_POST_EXECUTE, TOOL_PRE_EXECUTE
from dsh.kernel import Context
from dsh.llm import tool_result, user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import APPROVALS, QUESTIONS, TOOLS
from dsh.session import SessionEvent
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import (
    Action,
    Allow,
    Amend,
    Ask,
    BlockResult,
    CallOutcome,
    Deny,
    Rewrite,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.questions import Answer, Question


class Say(BaseModel):
    text: str = ""


async def shout(args: Say, context: ToolContext) -> str:
    return args.text.upper()


SHOUT = ToolDefinition(
    name="shout",
    description="Shout.",
    arguments=Say,
    execute=shout,
    describe=lambda args, context: Action(
        risk="exec", summary=f"shout {args.text}", command=f"shout {args.text}"
    ),
)


async def start(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, **kwargs: Any
) -> Runtime:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    runtime = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
        **kwargs,
    )
    runtime.root.get(TOOLS).register("shout", SHOUT)
    return runtime


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    started = await start(tmp_path, fake_llm, monkeypatch)
    yield started
    await started.aclose()


async def turn(
    runtime: Runtime, tmp_path: Path, prompt: str = "go", agent: Agent | None = None
) -> Agent:
    agent = agent or await runtime.agents.create(tmp_path)
    agent.followup(user_text(prompt))
    await agent.when_idle()
    return agent


def of(agent: Agent, kind: str) -> list[SessionEvent]:
    return [e for e in agent.session.events if e.type == kind]


def tool_texts(server: FakeLLM, request: int = -1) -> list[str]:
    return [
        m["content"] for m in server.chat_requests[request].body["messages"] if m["role"] == "tool"
    ]


def calls(*texts: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": t}) for t in texts])


# ---------------------------------------------------------------------- approvals


async def test_headless_denies_what_needs_approval_and_tells_the_model(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(calls("hi"))
    fake_llm.add(Reply(text="I could not."))
    agent = await turn(runtime, tmp_path)
    [text] = tool_texts(fake_llm)
    assert text.startswith("Error: shout was not run: no one is here to approve it")
    [resolved] = of(agent, "approval/resolved")
    assert (resolved.data.outcome, resolved.data.by) == ("deny", "headless")
    assert of(agent, "tool/result")[0].data.error.code == "DENIED"


async def test_the_user_approves_once_denies_with_feedback_and_allows_for_the_session(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    asked: list[ApprovalRequest] = []
    answers = iter(
        [
            ApprovalDecision(outcome="allow_once"),
            ApprovalDecision(outcome="deny", feedback="use a quieter voice"),
            ApprovalDecision(outcome="allow_session"),
        ]
    )

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return next(answers)

    runtime.root.get(APPROVALS).add_approver(approver)
    fake_llm.add(calls("one"))
    fake_llm.add(calls("two"))
    fake_llm.add(calls("three"))
    fake_llm.add(calls("four"))  # covered by the session grant: not asked
    fake_llm.add(Reply(text="done"))
    agent = await turn(runtime, tmp_path)
    assert [r.summary for r in asked] == ["shout one", "shout two", "shout three"]
    assert asked[0].grant == "shout(shout:*)"
    results = [e.data.message.result.content[0].text for e in of(agent, "tool/result")]
    assert results == ["ONE", "Error: the user denied shout: use a quieter voice", "THREE", "FOUR"]
    outcomes = [(e.data.outcome, e.data.by, e.data.pattern) for e in of(agent, "approval/resolved")]
    assert outcomes == [
        ("allow-once", "user", None),
        ("deny", "user", None),
        ("allow-session", "user", "shout(shout:*)"),
        ("allow-once", "rule", None),
    ]
    # The denial's feedback reached the model.
    assert "use a quieter voice" in tool_texts(fake_llm, 2)[-1]


async def test_session_grants_survive_a_resume(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await start(tmp_path, fake_llm, monkeypatch)

    async def allow_for_session(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(outcome="allow_session")

    first.root.get(APPROVALS).add_approver(allow_for_session)
    fake_llm.add(calls("a"))
    fake_llm.add(Reply(text="ok"))
    agent = await turn(first, tmp_path)
    await first.aclose()

    second = await start(tmp_path, fake_llm, monkeypatch)  # a new process: no approver at all
    fake_llm.add(calls("b"))
    fake_llm.add(Reply(text="ok"))
    resumed = await second.agents.resume(agent.id)
    await turn(second, tmp_path, agent=resumed)
    assert [e.data.message.result.content[0].text for e in of(resumed, "tool/result")][-1] == "B"
    await second.aclose()


async def test_permission_rules_and_modes_from_settings(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text(
        '[permissions]\nallow = ["shout(shout yes:*)"]\ndeny = ["shout(shout no:*)"]\n'
    )
    runtime = await start(tmp_path, fake_llm, monkeypatch)
    fake_llm.add(calls("yes please", "no way", "maybe"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    texts = tool_texts(fake_llm)
    assert texts[0] == "YES PLEASE"
    assert texts[1] == "Error: shout is not allowed: denied by the rule shout(shout no:*)"
    assert texts[2].startswith("Error: shout was not run: no one is here to approve it")
    await runtime.aclose()

    bypass = await start(tmp_path, fake_llm, monkeypatch, permission_mode="bypass")
    fake_llm.add(calls("maybe", "no way"))
    fake_llm.add(Reply(text="ok"))
    await turn(bypass, tmp_path)
    assert tool_texts(fake_llm)[0] == "MAYBE"
    assert "denied by the rule" in tool_texts(fake_llm)[1]  # deny rules hold even in bypass
    await bypass.aclose()


# ---------------------------------------------------------------------- the pipeline


async def test_hooks_timeouts_errors_and_spill(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    class Nothing(BaseModel):
        pass

    async def fails(args: Nothing, context: ToolContext) -> str:
        raise ToolError("the widget is jammed", "WIDGET_JAMMED")

    async def crashes(args: Nothing, context: ToolContext) -> str:
        raise KeyError("bug")

    async def slow(args: Nothing, context: ToolContext) -> str:
        await asyncio.sleep(5)
        return "never"

    async def huge(args: Nothing, context: ToolContext) -> ToolOutput:
        return ToolOutput(content="line of output\n" * 10_000)

    async def brief(args: Nothing, context: ToolContext) -> str:
        return "done"

    tools = runtime.root.get(TOOLS)
    for name, execute, extra in [
        ("fails", fails, {}),
        ("crashes", crashes, {}),
        ("slow", slow, {"timeout_s": 0.1}),
        ("huge", huge, {}),
        ("vetoed", huge, {}),
        ("scolded", huge, {}),
        ("noted", brief, {}),
    ]:
        tools.register(
            name,
            ToolDefinition(
                name=name,
                description=name,
                arguments=Nothing,
                execute=execute,
                read_only=True,
                **extra,
            ),
        )

    async def pre(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Any:
        return Deny("not today") if tool.name == "vetoed" else None

    async def post(tool: ToolDefinition, args: Any, outcome: Any, context: ToolContext) -> Any:
        if tool.name == "noted":
            return Amend(append="Diagnostics: none")
        return BlockResult("too loud, summarise instead") if tool.name == "scolded" else None

    tools.add_pre_hook(pre)
    tools.add_post_hook(post)
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name=n, arguments={})
                for n in ("fails", "crashes", "slow", "huge", "vetoed", "scolded", "noted")
            ]
        )
    )
    fake_llm.add(Reply(text="ok"))
    agent = await turn(runtime, tmp_path)
    codes = [e.data.error.code if e.data.error else None for e in of(agent, "tool/result")]
    assert codes == ["WIDGET_JAMMED", "KeyError", "TOOL_TIMEOUT", None, "DENIED", "BLOCKED", None]
    texts = tool_texts(fake_llm)
    assert texts[0] == "Error: the widget is jammed"
    assert "took longer than 0.1 s" in texts[2]
    assert texts[4] == "Error: vetoed was blocked: not today"
    assert texts[5] == "Error: too loud, summarise instead"
    assert texts[6] == "done\n\nDiagnostics: none"
    preview = texts[3]
    assert len(preview.encode()) <= 50_000
    path = Path(preview.split(" is in ")[1].split(":")[0])
    assert path.read_text() == "line of output\n" * 10_000
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "bytes omitted" in preview


async def test_an_ask_hook_forces_approval_even_where_rules_allow(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime.root.get(APPROVALS).mode = "bypass"

    async def careful(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Any:
        return Ask("a hook wants a human to look")

    runtime.root.get(TOOLS).add_pre_hook(careful)
    fake_llm.add(calls("hi"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert tool_texts(fake_llm)[0].startswith(
        "Error: shout was not run: no one is here to approve it"
    )


async def test_a_denial_wins_over_an_ask_whatever_the_order_of_the_hooks(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    ran: list[str] = []

    async def ask(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Ask:
        ran.append("ask")
        return Ask("look first")

    async def deny(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Deny:
        ran.append("deny")
        return Deny("never")

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        raise AssertionError("a denied call is not asked about")

    runtime.root.on(TOOL_PRE_EXECUTE, ask)
    runtime.root.on(TOOL_PRE_EXECUTE, deny)
    runtime.root.get(APPROVALS).add_approver(approve)
    fake_llm.add(calls("hi"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert tool_texts(fake_llm)[0] == "Error: shout was blocked: never"
    assert sorted(ran) == ["ask", "deny"]  # side by side: each hook judged the call


async def test_a_rewrite_is_judged_again_by_every_guard(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """One hook rewrites the call; another denies what the rewrite asks for: the
    rewritten call is denied, not run on the strength of the first judgement."""
    runtime.root.get(APPROVALS).mode = "bypass"
    seen: list[str] = []

    async def rewrite(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Any:
        return Rewrite({"text": "the secret"}) if args.text == "hi" else None

    async def guard(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Any:
        seen.append(args.text)
        return Deny("no secrets") if "secret" in args.text else None

    runtime.root.on(TOOL_PRE_EXECUTE, rewrite)
    runtime.root.on(TOOL_PRE_EXECUTE, guard)
    fake_llm.add(calls("hi", "ho"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert tool_texts(fake_llm) == ["Error: shout was blocked: no secrets", "HO"]
    assert seen == ["hi", "the secret", "ho"]


async def test_an_answer_from_a_hook_is_the_result_and_the_tool_never_runs(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A hook answers the call itself (a replay serving a recorded result), before the
    tool describes it: the tool does not run, nobody is asked, and no other hook is."""
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(outcome="allow_once")

    async def answer(tool: ToolDefinition, args: Any, context: ToolContext) -> Any:
        if args.text != "recorded":
            return None
        message = tool_result(context.call_id, "as recorded")
        return CallOutcome(message, None, ToolOutput(content="as recorded"))

    async def deny(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Any:
        return Deny("never") if args.text == "recorded" else None

    runtime.root.on(APPROVAL_ASK, approver)
    runtime.root.on(TOOL_PRE_EXECUTE, deny)
    runtime.root.on(TOOL_ANSWER, answer)
    fake_llm.add(calls("recorded", "live"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert tool_texts(fake_llm) == ["as recorded", "LIVE"]
    assert [request.summary for request in asked] == ["shout live"]  # only the one that ran


async def test_an_allow_hook_vouches_as_a_rule_would_but_not_past_a_deny_rule(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.toml").write_text(
        '[permissions]\ndeny = ["shout(shout no:*)"]\n'
    )
    runtime = await start(tmp_path, fake_llm, monkeypatch)
    try:

        async def vouch(
            tool: ToolDefinition, args: Any, action: Action, context: ToolContext
        ) -> Any:
            return Allow("the hook knows this one")

        runtime.root.on(TOOL_PRE_EXECUTE, vouch)
        fake_llm.add(calls("yes", "no way"))  # headless, default mode: no one to ask
        fake_llm.add(Reply(text="ok"))
        await turn(runtime, tmp_path)
        texts = tool_texts(fake_llm)
        assert texts[0] == "YES"
        assert texts[1].startswith("Error:")
        assert "denied by the rule" in texts[1]
    finally:
        await runtime.aclose()


async def test_post_hooks_amend_in_order_unless_one_blocks(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    def amend(text: str) -> Any:
        async def hook(
            tool: ToolDefinition, args: Any, outcome: CallOutcome, context: ToolContext
        ) -> Amend:
            return Amend(append=text)

        return hook

    async def block_loud(
        tool: ToolDefinition, args: Say, outcome: CallOutcome, context: ToolContext
    ) -> BlockResult | None:
        return BlockResult("too loud") if args.text == "loud" else None

    runtime.root.get(APPROVALS).mode = "bypass"
    tools = runtime.root.get(TOOLS)
    tools.add_post_hook(amend("first note"))
    runtime.root.on(TOOL_POST_EXECUTE, block_loud)
    tools.add_post_hook(amend("second note"))
    fake_llm.add(calls("quiet", "loud"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert tool_texts(fake_llm) == ["QUIET\n\nfirst note\n\nsecond note", "Error: too loud"]


async def test_a_tool_hook_on_an_agents_context_hears_only_that_agents_calls(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime.root.get(APPROVALS).mode = "bypass"

    async def veto(tool: ToolDefinition, args: Any, action: Action, context: ToolContext) -> Deny:
        return Deny("not in this agent")

    def setup(agent_ctx: Context) -> None:
        agent_ctx.get(TOOLS).add_pre_hook(veto)

    guarded = await runtime.agents.create(tmp_path, setup=setup)
    free = await runtime.agents.create(tmp_path)
    fake_llm.add(calls("a"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path, agent=guarded)
    assert tool_texts(fake_llm) == ["Error: shout was blocked: not in this agent"]
    fake_llm.add(calls("b"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path, agent=free)
    assert tool_texts(fake_llm) == ["B"]


async def test_the_newest_approver_decides_and_one_that_passes_defers(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    asked: list[str] = []

    async def older(request: ApprovalRequest) -> ApprovalDecision:
        asked.append("older")
        return ApprovalDecision(outcome="allow_once")

    async def newer(request: ApprovalRequest) -> ApprovalDecision | None:
        asked.append("newer")
        return None if request.summary == "shout pass" else ApprovalDecision(outcome="deny")

    runtime.root.get(APPROVALS).add_approver(older)
    ui = runtime.root.child(name="newer ui")
    ui.on(APPROVAL_ASK, newer, prepend=True)
    fake_llm.add(calls("deny", "pass"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert asked == ["newer", "newer", "older"]
    assert tool_texts(fake_llm) == ["Error: the user denied shout", "PASS"]

    await ui.dispose()  # the newer one goes with its context
    fake_llm.add(calls("again"))
    fake_llm.add(Reply(text="ok"))
    await turn(runtime, tmp_path)
    assert asked[-1] == "older"
    assert tool_texts(fake_llm) == ["AGAIN"]


# ---------------------------------------------------------------------- questions and todos


async def test_questions_are_answered_by_the_ui_or_refused_headless(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    question = {
        "questions": [
            {
                "id": "db",
                "question": "Which database?",
                "options": [{"label": "SQLite"}, {"label": "Postgres"}],
            }
        ]
    }
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    fake_llm.add(Reply(text="I will assume SQLite."))
    await turn(runtime, tmp_path)
    [refused] = tool_texts(fake_llm)
    assert refused.startswith("Error: no user is available to answer questions")

    seen: list[Sequence[Question]] = []

    async def answerer(questions: Sequence[Question], agent: Any) -> list[Answer]:
        seen.append(questions)
        return [Answer(id="db", selected=("Postgres",), custom="with PostGIS")]

    runtime.root.get(QUESTIONS).set_answerer(answerer)
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    fake_llm.add(Reply(text="Postgres it is."))
    await turn(runtime, tmp_path)
    assert seen[0][0].options[1].label == "Postgres"
    answer = json.loads(tool_texts(fake_llm)[0])
    assert answer == {"answers": [{"id": "db", "selected": ["Postgres"], "custom": "with PostGIS"}]}

    async def dismisses(questions: Sequence[Question], agent: Any) -> None:
        return None  # the person closed the dialog

    runtime.root.get(QUESTIONS).set_answerer(dismisses)  # the newest answers
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    fake_llm.add(Reply(text="Never mind."))
    await turn(runtime, tmp_path)
    assert len(seen) == 1
    assert tool_texts(fake_llm)[0] == "Error: the user dismissed the questions without answering"


async def test_todo_write_logs_the_list(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    todos = {
        "todos": [
            {"content": "write tests", "status": "completed"},
            {"content": "fix bug", "status": "in_progress"},
        ]
    }
    duplicate = {
        "todos": [{"content": "a", "status": "pending"}, {"content": "a", "status": "pending"}]
    }
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="todo_write", arguments=todos),
                ToolCallSpec(name="todo_write", arguments=duplicate),
            ]
        )
    )
    fake_llm.add(Reply(text="ok"))
    agent = await turn(runtime, tmp_path)
    [written] = of(agent, "todo/write")
    assert [(t.content, t.status) for t in written.data.todos] == [
        ("write tests", "completed"),
        ("fix bug", "in_progress"),
    ]
    texts = tool_texts(fake_llm)
    assert texts[0] == "Todo list updated: 1 completed, 1 in progress, 0 pending."
    assert "same content" in texts[1]
