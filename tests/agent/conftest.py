"""The runtime the agent loop's tests share: real plugins, the scripted model server
with quick retries, and the read-only echo tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.runtime import Runtime, start_runtime
from dsh.services import TOOLS
from dsh.testing import FakeLLM
from dsh.tools import ToolDefinition
from tests.agent.agent_support import EchoArgs, echo


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={
            "llm-deepseek": {
                "base_url": fake_llm.base_url,
                "retry": {"max_retries": 2, "base_delay_ms": 1},
            }
        },
    )
    started.root.get(TOOLS).register(
        "echo",
        ToolDefinition(
            name="echo",
            description="Say it back.",
            arguments=EchoArgs,
            execute=echo,
            read_only=True,
        ),
    )
    yield started
    await started.aclose()
