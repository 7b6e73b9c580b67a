"""The machine dsh runs on, as the model is told about it.

The facts are gathered once per process and provided as the ``host`` service, so the
system prompt stays the same for a whole session (a prompt cache's prefix), and a
replay can stand in the recorded machine's facts for this one's: a session recorded on
a Linux laptop with bash replays the same in CI with no ``$SHELL`` at all. Each stored
session's header keeps the facts it started with.
"""

from __future__ import annotations

import os
import platform

from dsh.kernel import ServiceKey
from dsh.wire import Frozen


class HostFacts(Frozen):
    platform: str
    """The operating system and its release, ``Linux 6.8.0``."""
    login_shell: str
    """The user's login shell (``$SHELL``), or ``unknown``."""

    @classmethod
    def this_machine(cls) -> HostFacts:
        system = f"{platform.system() or 'unknown'} {platform.release()}".strip()
        return cls(platform=system, login_shell=os.environ.get("SHELL") or "unknown")


HOST: ServiceKey[HostFacts] = ServiceKey("host")
