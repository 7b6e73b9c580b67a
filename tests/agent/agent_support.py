"""The echo tool and the helpers the agent loop's tests share: a new agent, its events
by type, and the check that its log rebuilds every request it sent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dsh.agent import (
    Agent,
)
from dsh.runtime import Runtime
from dsh.session import SessionEvent, check_log
from dsh.testing import FakeLLM
from dsh.testing.reconstruct import check_requests
from dsh.tools import ToolContext
from dsh_plugins._shared.chat_completions import ChatModel, request_body
from dsh_plugins.llm_deepseek import DEFAULT_MODELS


class EchoArgs(BaseModel):
    text: str
    delay: float = 0.0


async def echo(args: EchoArgs, context: ToolContext) -> str:
    if args.delay:
        await asyncio.sleep(args.delay)
    return f"echo: {args.text}"


async def new_agent(runtime: Runtime, tmp_path: Path, **options: Any) -> Agent:
    return await runtime.agents.create(tmp_path, runtime.agents.defaults.model_copy(update=options))


def types(agent: Agent, *, chunks: bool = False) -> list[str]:
    return [e.type for e in agent.session.events if chunks or e.type != "assistant/chunk"]


def of(agent: Agent, kind: str) -> list[SessionEvent]:
    return [e for e in agent.session.events if e.type == kind]


def reconstructable(agent: Agent, server: FakeLLM) -> None:
    assert check_log(agent.session.events) == []
    check_requests(
        agent.session.events,
        [r.body for r in server.chat_requests],
        lambda o: request_body(o, DEFAULT_MODELS.get(o.model, ChatModel())),
    )


def texts(request_body_: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request_body_["messages"]]
