"""The environment a child process gets: ours, minus what looks like a credential.

Anything a tool starts (a shell command, a terminal, a language server) can print its
environment into the transcript and from there to a provider, so variables that look
like secrets (:func:`dsh.held_secrets.looks_secret`: by name, ``*_TOKEN``,
``*_PAT``, ``*_PWD``, ``*_DSN``..., or an address holding a password) are dropped, and
so is dsh's own ``DSH_*`` configuration. dsh took such variables out of its own
environment at start (:mod:`dsh.held_secrets`); names the user lists in
``passthrough`` (``GH_TOKEN`` for ``gh``) are handed back from there.

Every child also gets the git settings of :mod:`dsh.policy.git_config`, under which
no git it runs obeys a program a repository's files name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from dsh.held_secrets import looks_secret, passed_through
from dsh.policy.git_config import with_safe_git as with_safe_git

if TYPE_CHECKING:
    from dsh.settings import Settings


def scrubbed(name: str, value: str = "") -> bool:
    """Whether a variable is withheld from child processes."""
    return looks_secret(name, value) or name.startswith("DSH_")


def child_environment(
    base: Mapping[str, str], *, passthrough: Collection[str] = ()
) -> dict[str, str]:
    env = {
        name: value
        for name, value in base.items()
        if name in passthrough or not scrubbed(name, value)
    }
    env.update(passed_through(name for name in passthrough if name not in env))
    return with_safe_git(env)


def user_passthrough(settings: Settings | None) -> tuple[str, ...]:
    """``[environment] passthrough`` as the user's own layers set it (their settings
    file, the environment; checked when settings load): a project, trusted or not,
    cannot hand the user's secrets to the programs tools start."""
    if settings is None:
        return ()
    names = settings.own_section("environment").get("passthrough", ())
    if not isinstance(names, list | tuple):
        return ()
    return tuple(name for name in names if isinstance(name, str))
