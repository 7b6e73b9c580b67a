from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

if TYPE_CHECKING:
    from dsh.testing import FakeLLM
    from tests.e2e.harness import Dsh

pytest_plugins = ["dsh.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _private_dsh_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test a ``$DSH_HOME`` of its own (a test may set another): nothing a test
    runs reads or writes the developer's ``~/.dsh``, such as its installation key."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path_factory.mktemp("dsh-home")))


@pytest_asyncio.fixture
async def dsh(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[Dsh]:
    """A dsh installation for ``dsh -p`` runs against the test's scripted server (see
    tests/e2e/harness.py); a child still running when the test ends is killed. A test
    module that needs more set up overrides it with a fixture taking this one."""
    from tests.e2e.harness import Dsh

    installation = Dsh(tmp_path, fake_llm)
    try:
        yield installation
    finally:
        await installation.kill_leftovers()
