"""The runtime the compaction tests share: automatic compaction off, so each test
compacts when it says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.runtime import Runtime
from dsh.testing import FakeLLM
from tests.plugins.compaction.support import start


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    started = await start(tmp_path, fake_llm, compaction={"auto": False})
    yield started
    await started.aclose()
