"""What the end-to-end tests share: a real terminal (tmux) of the test's own."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.tmux import Terminal


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
