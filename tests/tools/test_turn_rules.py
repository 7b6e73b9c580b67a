"""A turn's extra allow rules travel as rules: read from text once, never formatted
back to text and read again on the way to the permission check."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh.agent import PromptAllow, PromptDecision, PromptSubmit
from dsh.hooks import AGENT_PROMPT_SUBMIT
from dsh.kernel import Next
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import TOOLS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import Action, Rule, ToolContext, ToolDefinition
from dsh_plugins.custom_commands import allowed_rules


class Say(BaseModel):
    text: str = ""


async def shout(arguments: Say, context: ToolContext) -> str:
    return arguments.text.upper()


SHOUT = ToolDefinition(
    name="shout",
    description="Shout.",
    arguments=Say,
    execute=shout,
    describe=lambda arguments, context: Action(risk="exec", summary=f"shout {arguments.text}"),
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
    started.root.get(TOOLS).register(SHOUT)
    yield started
    await started.aclose()


async def run_turn(runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path) -> list[str]:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hi"})]))
    fake_llm.add(Reply(text="done"))
    agent = await runtime.agents.create(tmp_path)
    agent.followup(user_text("go"))
    await agent.when_idle()
    body = fake_llm.chat_requests[1].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_a_prompt_hooks_rule_object_allows_its_turns_call(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async def allow_shout(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        return PromptAllow(allow=(Rule("shout", "shout hi"),))

    runtime.root.on(AGENT_PROMPT_SUBMIT, allow_shout)
    assert await run_turn(runtime, fake_llm, tmp_path) == ["HI"]  # headless: unasked


async def test_without_the_rule_the_same_call_is_asked_and_denied_headless(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    [text] = await run_turn(runtime, fake_llm, tmp_path)
    assert text.startswith("Error: shout was not run: no one is here to approve it")


def test_allowed_tools_are_read_into_rules_in_dshs_names() -> None:
    assert allowed_rules("Bash(git add:*), Read, WebFetch(domain:x.org)") == (
        Rule("bash", "git add:*"),
        Rule("read"),
        Rule("web_fetch", "domain:x.org"),
    )
    assert allowed_rules("Bash(unclosed") == ()


def test_text_given_as_a_turn_rule_is_refused_where_it_is_given() -> None:
    with pytest.raises(TypeError, match=r"Rule objects, not 'bash\(ls\)'.*parse_rules"):
        PromptAllow(allow=("bash(ls)",))  # type: ignore[arg-type]
