"""What the end-to-end tests share: a real terminal (tmux) of the test's own, and the
check that every session a test stored replays identically."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest

from tests.support.replays import check_homes, dsh_homes, failures_text
from tests.support.tmux import Terminal

_OUTCOME = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_OUTCOME] = report
    return report


@pytest.fixture(autouse=True)
async def _every_session_replays(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[None]:
    """After a test that passed, every session it stored (under its ``tmp_path``, or
    in the private ``$DSH_HOME`` it was given) replays identically with recorded tools
    (``dsh replay``): each end-to-end test is a replay test too. Set up before the
    test's own fixtures, so it runs after they have stopped every dsh it started.
    ``DSH_E2E_REPLAY=0`` leaves it out (to measure what it costs)."""
    private_home = Path(os.environ["DSH_HOME"])
    yield
    if os.environ.get("DSH_E2E_REPLAY") == "0":  # measuring what the check costs
        return
    outcome = request.node.stash.get(_OUTCOME, None)
    if outcome is None or not outcome.passed or request.node.get_closest_marker("unreplayable"):
        return
    checked = await check_homes(dsh_homes(tmp_path, private_home))
    failures = failures_text(checked)
    if failures:
        pytest.fail(failures, pytrace=False)


@pytest.fixture
async def terminal(tmp_path: Path) -> AsyncIterator[Terminal]:
    """A tmux server on a private socket for this test, closed after it."""
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        await term.close()


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[str]:
    """A name in the machine's ``/tmp``, which a command inside the sandbox writes to
    its own ``/tmp`` instead; removed afterwards, should it land here."""
    path = Path(f"/tmp/dsh-sandbox-scratch-{os.getpid()}-{tmp_path.name}")
    try:
        yield str(path)
    finally:
        path.unlink(missing_ok=True)
