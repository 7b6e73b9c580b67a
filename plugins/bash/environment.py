"""The environment a command runs in: the scrubbed child environment of
:func:`dsh.tools.child_environment`, with colour and pagers switched off (nobody reads
the output on a terminal) and the session named, so a command can find its log.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dsh.paths import dsh_home
from dsh.tools import child_environment

FIXED = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "DSH_SHELL": "1"}


def shell_environment(
    base: Mapping[str, str], *, session_id: str, passthrough: Collection[str] = ()
) -> dict[str, str]:
    env = child_environment(base, passthrough=passthrough)
    env.update(FIXED)
    env["DSH_HOME"] = str(dsh_home())
    env["DSH_SESSION_ID"] = session_id
    return env
