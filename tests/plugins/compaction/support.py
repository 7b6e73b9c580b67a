"""A real runtime against the scripted server, with a small context window, for the
compaction tests: the echo and dump test tools, the bundled plugins, real sessions."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh.agent import Agent
from dsh.commands import CommandContext
from dsh.kernel import discover
from dsh.runtime import Runtime, start_runtime
from dsh.services import COMMANDS
from dsh.session import SessionEvent
from dsh.testing import FakeLLM, ToolCallSpec
from dsh.testing.reconstruct import check_requests
from dsh_plugins._shared.chat_completions import ChatModel, request_body
from dsh_plugins.compaction import SERVICE, CompactionService, rebuild_request
from dsh_plugins.compaction.events import CompactionSummary
from dsh_plugins.compaction.request import INSTRUCTION
from dsh_plugins.llm_deepseek import DEFAULT_MODELS
from tests.support.command_host import RecordingHost

WINDOW = 20_000
"""The test model's context window: compaction is due from 17,000 tokens."""
MODULES = ["tests.support.echo_tool", "tests.plugins.compaction.dump_tool"]


async def start(
    tmp_path: Path,
    server: FakeLLM,
    *,
    window: int = WINDOW,
    output_cap: int | None = None,
    compaction: dict[str, Any] | None = None,
) -> Runtime:
    (tmp_path / "project").mkdir(exist_ok=True)
    model: dict[str, Any] = {"context_window": window}
    if output_cap is not None:
        model["max_output_tokens"] = output_cap
    return await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path / "project",
        candidates=discover(MODULES),
        plugin_configs={
            "llm-deepseek": {
                "base_url": server.base_url,
                "retry": {"max_retries": 0},
                "models": {"deepseek-flash": model},
            },
            "compaction": compaction or {},
        },
    )


async def command(runtime: Runtime, agent: Agent, line: str) -> RecordingHost:
    host = RecordingHost()
    assert await runtime.root.get(COMMANDS).run(line, CommandContext(agent, runtime.root, host))
    return host


async def turn(agent: Agent, text: str) -> None:
    from dsh.llm import user_text

    agent.followup(user_text(text))
    await asyncio.wait_for(agent.when_idle(), 15)


def service(runtime: Runtime) -> CompactionService:
    found = runtime.root.get(SERVICE)
    assert isinstance(found, CompactionService)
    return found


def dump(size: int, label: str = "row") -> ToolCallSpec:
    return ToolCallSpec(name="dump", arguments={"size": size, "label": label})


def echo(text: str) -> ToolCallSpec:
    return ToolCallSpec(name="echo", arguments={"text": text})


def of_type(events: Sequence[SessionEvent], type_: str) -> list[SessionEvent]:
    return [e for e in events if e.type == type_]


def body_for(options: Any) -> dict[str, Any]:
    return request_body(options, DEFAULT_MODELS.get(options.model, ChatModel()))


def is_compaction(body: dict[str, Any]) -> bool:
    """Whether a request body is a summary request (its last message asks for one)."""
    last = body["messages"][-1]
    return last["role"] == "user" and text_of(last).startswith(INSTRUCTION)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def all_text(body: dict[str, Any]) -> str:
    return "\n".join(text_of(m) + str(m.get("tool_calls", "")) for m in body["messages"])


def check_reconstructable(events: Sequence[SessionEvent], bodies: Sequence[dict[str, Any]]) -> None:
    """Every request the server received can be rebuilt from the log alone: the
    conversation's by the core's helper, each summary request by the plugin's."""
    conversation = [b for b in bodies if not is_compaction(b)]
    summaries = [b for b in bodies if is_compaction(b)]
    check_requests(events, conversation, body_for)
    done = [e.data.compaction_id for e in events if isinstance(e.data, CompactionSummary)]
    for compaction_id in done:
        rebuilt = body_for(rebuild_request(events, compaction_id))
        assert rebuilt in summaries, (
            f"summary request {compaction_id} differs from its rebuilt form"
        )
