"""``dsh doctor``'s vocabulary: one check's result, and what a check is asked.

The core checks what it owns (the settings, the configured provider's key, the
sandbox, git, node, and with ``--live`` one tiny model request); a plugin adds checks
of what it owns by listening on :data:`dsh.hooks.DOCTOR_CHECK` and returning
:class:`Check` values (the provider plugins check their endpoint, the fs plugin its
``rg``, the lsp plugin its servers' commands, the mcp plugin its servers). A check
never prints a secret: it says where a key was found, never any of its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dsh.kernel import Gather
from dsh.wire import Frozen

CheckStatus = Literal["ok", "warn", "fail"]
"""``ok``: works. ``warn``: works less well than it could (the exit status stays 0).
``fail``: something dsh needs is broken (``dsh doctor`` exits 1)."""

MARKS: dict[CheckStatus, str] = {"ok": "✓", "warn": "!", "fail": "✗"}


class Check(Frozen):
    """One line of ``dsh doctor``: what was checked, how it stands, and for a problem
    how to fix it."""

    area: str
    """What part of dsh the check is about: ``settings``, ``key``, ``endpoint``,
    ``sandbox``, ``git``, ``ripgrep``, ``node``, ``lsp``, ``mcp``..."""
    name: str
    """The thing checked, as the line names it (``deepseek``, ``lsp python``...)."""
    status: CheckStatus
    detail: str
    fix: str | None = None
    """What to do about it; given for every ``warn`` and ``fail``."""


def ok(area: str, name: str, detail: str) -> Check:
    return Check(area=area, name=name, status="ok", detail=detail)


def warn(area: str, name: str, detail: str, fix: str) -> Check:
    return Check(area=area, name=name, status="warn", detail=detail, fix=fix)


def fail(area: str, name: str, detail: str, fix: str) -> Check:
    return Check(area=area, name=name, status="fail", detail=detail, fix=fix)


@dataclass(frozen=True)
class DoctorAsk:
    """What the checks are asked: the provider route and model configured, whether a
    check may spend (``--live``: one request with ``max_tokens`` 1), and how long any
    one check may take, in seconds (a check that would wait longer reports that
    instead)."""

    provider: str
    model: str
    live: bool = False
    timeout_s: float = 10.0


DOCTOR_CHECK: Gather[[DoctorAsk], Sequence[Check]] = Gather(
    "doctor/check",
    doc="`dsh doctor` runs: the checks of what a plugin owns (its endpoint, programs, "
    "servers), each a Check with a fix for a problem; a listener bounds its own waits "
    "by the ask's timeout and returns a failed Check rather than raise",
)
