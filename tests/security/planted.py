"""What a hostile repository plants for git to run, shared by the tests that attack
git's files through dsh (each makes ``PWNED`` if git obeys it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

FSMONITOR = '[core]\n\tfsmonitor = "touch PWNED; false"\n'
"""A ``.git/config`` whose next ``git status`` runs a program."""
HOOK = "#!/bin/sh\ntouch PWNED\n"
"""A hook git runs on commit."""

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git_init(project: Path) -> None:
    """Make ``project`` a git repository, as a cloned one is."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
