from __future__ import annotations

import pytest

from tests.e2e.harness import SETTINGS, Dsh


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    # An editor is interactive, so the title plugin would name each session with one
    # more model call; the scripted server answers only the conversation's.
    (dsh.home / "settings.toml").write_text(SETTINGS + 'disabled = ["title"]\n')
    return dsh
