from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from dsh.runtime import Runtime
    from dsh.testing import FakeLLM
    from tests.e2e.harness import Dsh

pytest_plugins = ["dsh.testing.pytest_plugin"]

# No test asserts a duration, Hypothesis's included: by default it fails an example
# that takes over 200 ms, or data that is slow to generate, which a busy machine (or
# the suite's own parallel workers) can make happen. Figures live in bench/.
settings.register_profile(
    "dsh-default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("dsh-default")


@pytest.fixture(autouse=True)
def _no_inherited_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers run with ``COLUMNS=80`` and ``LINES=24``: Rich and Textual
    would take that size over the real one of the terminal a test gives its dsh (a
    tmux window of 100x30, a pty), and lay the screen out for the wrong size."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _private_dsh_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test a ``$DSH_HOME`` and a ``$CLAUDE_CONFIG_DIR`` of its own (a test may
    set another): nothing a test runs reads or writes the developer's ``~/.dsh``, such
    as its installation key, or reads the developer's ``~/.claude``."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path_factory.mktemp("dsh-home")))
    # Nor the developer's Claude Code settings (~/.claude), which dsh reads too.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path_factory.mktemp("claude-home")))


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy and no CA settings from the environment: a client reaches the server
    directly and trusts what the system trusts (the TLS tests)."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest_asyncio.fixture
async def bundled_vocabulary() -> AsyncIterator[None]:
    """The event types and fold steps of the bundled plugins, for tests that write or
    read their events (todo, compaction, title) without a runtime registering them."""
    from tests.support.vocabulary import async_plugin_vocabulary

    async with async_plugin_vocabulary():
        yield


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


@pytest_asyncio.fixture
async def runtime(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    """The bundled runtime, in process, talking to the test's scripted server. A folder
    or module that needs more set up (a tool of its own, other settings) overrides it."""
    from dsh.runtime import start_runtime

    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    started = await start_runtime(
        home=tmp_path / "home",
        cwd=tmp_path,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
    )
    yield started
    await started.aclose()
