"""What one call would do, as its tool describes it: the facts every permission
decision is made from (the policy never reads a call's raw arguments)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from dsh.sandbox.policy import Widening

Risk = Literal["read", "write", "exec", "network", "external"]


@dataclass(frozen=True)
class Escalation:
    """A call's request to run with more than the sandbox's policy allows."""

    widening: Widening
    reason: str
    """Why, in the model's words: shown to the person."""


@dataclass(frozen=True)
class Action:
    """What one call would do, for permission rules and the approval dialog."""

    risk: Risk
    summary: str
    """One line: the command, or ``edit src/app.py (+3 -1)``."""
    details: str | None = None
    """The whole command, or a unified diff."""
    paths: tuple[Path, ...] = ()
    """Files the call would write, resolved (symlinks followed)."""
    command: str | None = None
    """The shell command, for ``bash(...)`` rules."""
    reads: tuple[Path, ...] = ()
    """Files (or folders searched) the call would read, absolute; checked as named and
    with symlinks followed against the secret files (:mod:`dsh.policy.protected`)."""
    workdir: Path | None = None
    """Where ``command`` runs when not in the working directory: its relative paths
    (``echo x > config``) are taken from there."""
    target: str | None = None
    """What a rule naming the tool matches its pattern against instead of the summary
    (for a call that types into a running program: that program)."""
    typed: bool = False
    """``command`` is typed into a program already running (a terminal), which may read
    the keys otherwise than a shell would (a pager saving to a file on ``s``): plan
    mode never vouches for it as only reading."""
    unchecked: str | None = None
    """Why no rule can vouch for this call and deny rules cannot see all it does (keys
    that edit a shell's line before it runs): always asked, never granted."""
    sandboxed: bool = False
    """The call starts a program, or runs a line, that the OS sandbox contains (a
    command, a terminal): when the sandbox cannot start it would run unsandboxed, so
    it is asked in every mode (:mod:`dsh.policy.escalation`)."""
    escalation: Escalation | None = None
    """What the call asks beyond the sandbox's policy (the bash tool's ``escalate``):
    asked every time unless a signed session grant covers it; never allowed by a
    mode or a rule."""


class ToolNames(Protocol):
    """All the policy knows of a tool besides its call's :class:`Action`: the names a
    rule may give it (a ``dsh.tools.ToolDefinition`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def names(self) -> tuple[str, ...]:
        """Its own name, then those Claude Code gives such a tool."""
        ...
