"""The environment a command runs in: ours, minus what looks like a credential.

A model-written command can print its environment into the transcript (and from
there to a provider), so names that look like secrets are dropped, and so is dsh's
own ``DSH_*`` configuration. Tools that need one of them back (``gh`` reads
``GH_TOKEN``) are named in the ``env_passthrough`` setting. Colour and pagers are
switched off: nobody reads the output on a terminal.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from dsh.paths import dsh_home

SECRET_NAME = re.compile(r"KEY|PASSWORD|SECRET|TOKEN", re.IGNORECASE)

FIXED = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "DSH_SHELL": "1"}


def scrubbed(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) or name.startswith("DSH_")


def shell_environment(
    base: Mapping[str, str], *, session_id: str, passthrough: Collection[str] = ()
) -> dict[str, str]:
    env = {name: value for name, value in base.items() if name in passthrough or not scrubbed(name)}
    env.update(FIXED)
    env["DSH_HOME"] = str(dsh_home())
    env["DSH_SESSION_ID"] = session_id
    return env
