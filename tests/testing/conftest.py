"""The HTTP client the scripted model server's tests drive it with."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.testing.fake_llm_support import TIMEOUT


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as opened:
        yield opened
