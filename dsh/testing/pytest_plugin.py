"""The ``fake_llm`` pytest fixture. Enable it in a ``conftest.py`` with
``pytest_plugins = ["dsh.testing.pytest_plugin"]``; it needs pytest-asyncio."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from dsh.testing.fake_llm import FakeLLM


@pytest_asyncio.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A started :class:`FakeLLM` with an empty script; add replies with ``add()``."""
    async with FakeLLM() as server:
        yield server
