"""The environment a child process gets: ours, minus what looks like a credential.

Anything a tool starts (a shell command, a terminal, a language server) can print its
environment into the transcript and from there to a provider, so names that look like
secrets are dropped, and so is dsh's own ``DSH_*`` configuration. Names the user lists
in ``passthrough`` (``GH_TOKEN`` for ``gh``) are kept.

Every child also gets the git settings of :mod:`dsh.tools.git_config`, under which
no git it runs obeys a program a repository's files name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from dsh.tools.git_config import git_environment_overrides, without_exported

SECRET_NAME = re.compile(r"KEY|PASSWORD|SECRET|TOKEN", re.IGNORECASE)


def scrubbed(name: str) -> bool:
    """Whether a variable is withheld from child processes."""
    return bool(SECRET_NAME.search(name)) or name.startswith("DSH_")


def child_environment(
    base: Mapping[str, str], *, passthrough: Collection[str] = ()
) -> dict[str, str]:
    kept = {
        name: value for name, value in base.items() if name in passthrough or not scrubbed(name)
    }
    return with_safe_git(kept)


def with_safe_git(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the git settings every child runs under (its own exported
    ``GIT_CONFIG_COUNT`` entries kept, after dsh's)."""
    return {**without_exported(env), **git_environment_overrides(env)}
