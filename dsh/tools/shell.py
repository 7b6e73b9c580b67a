"""The command analysis: kept here for plugins that import it from
``dsh.tools.shell``; the analysis itself is :mod:`dsh.policy.shell`."""

from __future__ import annotations

from dsh.policy.shell import (
    MAX_DEPTH,
    MAX_LENGTH,
    SHELLS,
    Analysis,
    Invocation,
    analyse,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "SHELLS",
    "Analysis",
    "Invocation",
    "analyse",
]
