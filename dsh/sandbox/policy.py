"""What a sandboxed command may do: the policies, and what an approved escalation adds
for one command. (The ``[sandbox]`` table is :class:`dsh.settings_tables.SandboxTable`.)

Nothing heavy is imported here: the command line's ``--sandbox`` choices come from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

Policy = Literal["read-only", "workspace-write", "off"]
"""``workspace-write``: the project and a private temp folder writable, no network;
``read-only``: only the private temp folder writable; ``off``: no sandbox."""

POLICIES: tuple[Policy, ...] = ("read-only", "workspace-write", "off")
"""Narrowest first, as :data:`dsh.permission_modes.MODES` are."""

DEFAULT_POLICY: Policy = "workspace-write"


def narrowest(*policies: Policy) -> Policy:
    """The policy that lets a command do least of those given."""
    return min(policies, key=POLICIES.index)


class Widening(NamedTuple):
    """What an approved escalation adds to the policy, for one command. (A named tuple,
    not a dataclass: ``dataclasses`` would cost the command line 10 ms to import.)"""

    network: bool = False
    """The host's network instead of the sandbox's own loopback."""
    writable: tuple[Path, ...] = ()
    """Paths made writable (they must exist)."""
    unsandboxed: bool = False
    """No sandbox at all."""

    def __bool__(self) -> bool:
        return self.network or bool(self.writable) or self.unsandboxed

    def describe(self) -> str:
        """What it grants, as the approval dialog says it."""
        if self.unsandboxed:
            return "run outside the sandbox"
        parts = []
        if self.network:
            parts.append("use the network")
        if self.writable:
            parts.append("write " + ", ".join(str(path) for path in self.writable))
        return " and ".join(parts) or "nothing more"
