"""Calls the OS sandbox does not contain as its policy says: an escalation the model
asks for (the bash tool's ``escalate``: the network, a folder to write, no sandbox),
and every command while the sandbox cannot start (it would run unsandboxed).

Both are the person's call, in every permission mode (bypass included) and whatever
the allow rules say: a mode or a rule vouches for what a command is, not for taking
the walls down around it, and a project's settings must never be able to. So
:func:`sandbox_need` reads only the session's signed grants (:mod:`dsh.policy.grants`),
never the allow rules.

An escalation's "allow for this session" names each program the command runs and
what it widens, one rule each: ``sandbox(curl network)``, ``sandbox(npm write
/srv/out)``, ``sandbox(make unsandboxed)``. A later call asking no more for the same
programs runs unasked (if the command itself is allowed); another program is asked.
A command that runs while the sandbox cannot start is asked every time, never granted.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsh.policy.action import Action
from dsh.policy.permissions import SANDBOX_GRANT, Rule
from dsh.policy.programs import base_name
from dsh.policy.shell import analyse
from dsh.sandbox.policy import Widening

if TYPE_CHECKING:
    from dsh.sandbox.service import SandboxStatus

GRANT_TOOL = SANDBOX_GRANT
NOTHING_RUN = frozenset({"cd", "pushd", "popd", "true", "false", ":"})
"""Builtins that start nothing: a grant need not name them."""


@dataclass(frozen=True)
class SandboxNeed:
    """What a call needs of the sandbox beyond its policy, and whether to ask."""

    widening: Widening
    """What the call runs with once allowed."""
    question: str | None
    """Why the person must be asked; None when a session grant covers the escalation
    (the call is then judged as any other)."""
    grant: tuple[Rule, ...] = ()
    """The escalation's "allow for this session" (empty: none can be offered)."""


def sandbox_need(
    action: Action, status: SandboxStatus | None, granted: Iterable[Rule]
) -> SandboxNeed | None:
    """``status``: the sandbox's (None where there is no sandbox service, as when a
    tool runs outside a runtime: an escalation is still asked)."""
    if status is not None and status.policy == "off":
        return None  # nothing is contained, so nothing is widened: as before the sandbox
    if status is not None and status.unavailable and action.sandboxed:
        question = f"the sandbox cannot start: {status.reason}; this command would run unsandboxed"
        return SandboxNeed(Widening(unsandboxed=True), question)
    escalation = action.escalation
    if escalation is None or not escalation.widening:
        return None
    widening = escalation.widening
    programs = granted_programs(action)
    if programs and all(_covered(program, widening, granted) for program in programs):
        return SandboxNeed(widening, None)
    policy = status.policy if status is not None else "sandbox's"
    question = (
        f"the command asks to {widening.describe()}, beyond the {policy} policy of the "
        f"sandbox, because: {escalation.reason}"
    )
    grant = tuple(rule for program in programs for rule in grant_rules(program, widening))
    return SandboxNeed(widening, question, grant)


def granted_programs(action: Action) -> list[str]:
    """The programs a session grant for ``action``'s escalation names: every program
    its command runs (none when the command cannot be read whole, so it is asked)."""
    if action.command is None or action.unchecked is not None:
        return []
    analysis = analyse(action.command)
    if not analysis.checkable or analysis.programs is None:
        return []
    return sorted(
        name for name in (base_name(p) for p in analysis.programs) if name not in NOTHING_RUN
    )


def grant_rules(program: str, widening: Widening) -> list[Rule]:
    if widening.unsandboxed:
        return [Rule(GRANT_TOOL, shlex.join([program, "unsandboxed"]))]
    rules = [Rule(GRANT_TOOL, shlex.join([program, "network"]))] if widening.network else []
    rules += [Rule(GRANT_TOOL, shlex.join([program, "write", str(p)])) for p in widening.writable]
    return rules


def _granted(rules: Iterable[Rule], program: str) -> list[Sequence[str]]:
    found: list[Sequence[str]] = []
    for rule in rules:
        if rule.tool != GRANT_TOOL or not rule.pattern:
            continue
        try:
            words = shlex.split(rule.pattern)
        except ValueError:
            continue
        if len(words) >= 2 and words[0] == program:
            found.append(words[1:])
    return found


def _covered(program: str, widening: Widening, rules: Iterable[Rule]) -> bool:
    granted = _granted(rules, program)
    if ["unsandboxed"] in granted:
        return True
    if widening.unsandboxed:
        return False
    if widening.network and ["network"] not in granted:
        return False
    folders = [Path(words[1]) for words in granted if len(words) == 2 and words[0] == "write"]
    return all(_under_any(path, folders) for path in widening.writable)


def _under_any(path: Path, folders: Sequence[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == folder or folder in real.parents for folder in folders)
