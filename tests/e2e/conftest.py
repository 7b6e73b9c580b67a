"""What the end-to-end tests share: a real terminal (tmux) of the test's own."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
