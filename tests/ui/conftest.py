"""The runtime the interactive UIs' tests share: real plugins, the scripted model
server, the echo test tool, and no background title call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input

from dsh.runtime import Runtime
from dsh.testing import FakeLLM
from tests.ui.tui_support import make_runtime


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    started = await make_runtime(tmp_path / "home", tmp_path, fake_llm)
    yield started
    await started.aclose()


@pytest.fixture
def pipe() -> Iterator[PipeInput]:
    """Input for plain mode (see tests/ui/plain_support.py)."""
    with create_pipe_input() as created:
        yield created
