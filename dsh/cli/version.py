"""``dsh --version``: the version, and which commit a development install runs.

A release says its version alone. A checkout (the editable install the README's clone
commands make) says the commit it is at, read with git there; an install from a git
URL (``uv tool install git+…``) says the commit its installer recorded (PEP 610's
``direct_url.json``). Git may be absent or slow: no commit is said then, and nothing
fails.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dsh
from dsh import DISTRIBUTION, __version__

SHORT = 10
"""Characters of a commit id shown."""
GIT_TIMEOUT_S = 3.0


def version_line() -> str:
    commit = _installed_commit() or _checkout_commit()
    return f"dsh {__version__}" + (f" (commit {commit})" if commit else "")


def _direct_url() -> dict[str, Any]:
    try:
        text = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return {}
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _installed_commit() -> str | None:
    """The commit an install from a git URL recorded."""
    vcs = _direct_url().get("vcs_info")
    commit = vcs.get("commit_id") if isinstance(vcs, dict) else None
    return commit[:SHORT] if isinstance(commit, str) and commit else None


def _checkout_commit() -> str | None:
    """The commit of the checkout dsh runs from; None for an installed wheel."""
    root = Path(dsh.__file__).resolve().parent.parent
    if not (root / ".git").exists():  # a worktree's .git is a file
        return None
    try:
        run = subprocess.run(
            ["git", "-C", str(root), "rev-parse", f"--short={SHORT}", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = run.stdout.strip()
    return commit if run.returncode == 0 and commit else None


class VersionAction(argparse.Action):
    """argparse's ``version`` action, with the line worked out only when asked for:
    every run builds the parser, and git need not run for that."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show the version and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(version_line())
        parser.exit()
