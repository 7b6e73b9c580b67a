"""An OS sandbox for everything the model runs (Linux: bubblewrap).

Public API: the policies (:data:`Policy`, :data:`POLICIES`, :func:`narrowest`),
:class:`Widening` (what an approved escalation adds for one command), and the
``sandbox`` service (:class:`Sandbox`, key ``dsh.services.SANDBOX``):
:meth:`Sandbox.ready` → :class:`SandboxStatus`, :meth:`Sandbox.wrap` →
:class:`Wrapped`, started with :func:`launch_options`. The ``[sandbox]`` table is
:class:`dsh.settings_tables.SandboxTable`.

The service's names load on first use: the command line reads the policies before
anything else is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh.sandbox.policy import DEFAULT_POLICY, POLICIES, Policy, Widening, narrowest

if TYPE_CHECKING:
    from dsh.sandbox.service import (
        Sandbox,
        SandboxStatus,
        SandboxUnavailable,
        Wrapped,
        launch_options,
    )

__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "Policy",
    "Sandbox",
    "SandboxStatus",
    "SandboxUnavailable",
    "Widening",
    "Wrapped",
    "launch_options",
    "narrowest",
]

_SERVICE = {"Sandbox", "SandboxStatus", "SandboxUnavailable", "Wrapped", "launch_options"}


def __getattr__(name: str) -> Any:
    if name in _SERVICE:
        from dsh.sandbox import service

        return getattr(service, name)
    raise AttributeError(f"module 'dsh.sandbox' has no attribute {name!r}")
