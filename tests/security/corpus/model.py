"""What a corpus entry is: a call, the decision it must get, and the project it runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class Case:
    expect: Verdict
    command: str | None = None
    """For the bash tool."""
    tool: str = "bash"
    arguments: dict[str, Any] = field(default_factory=dict)
    """For other tools (``{P}``/``{V}`` replaced in string values)."""
    creates: bool = False
    """Allowed and meant to create ``{P}``: it must exist afterwards."""

    def call(self, marker: str, victim: str) -> tuple[str, dict[str, Any]]:
        def fill(text: str) -> str:
            return text.replace("{P}", marker).replace("{V}", victim)

        if self.command is not None:
            return "bash", {"command": fill(self.command), "description": "corpus"}
        arguments = {k: fill(v) if isinstance(v, str) else v for k, v in self.arguments.items()}
        return self.tool, arguments


@dataclass(frozen=True)
class Group:
    name: str
    mode: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    cases: tuple[Case, ...] = ()
    git: bool = False
    """The project is a git repository with one commit."""
    files: tuple[tuple[str, str], ...] = ()
    """Files the project holds besides (path, text), written after ``git``; ``{ALL}``
    in a text stands for every case's marker, in the folder the program runs in and
    the one above it (a planted program that runs makes every case fail)."""


def ask(*commands: str) -> tuple[Case, ...]:
    return tuple(Case("ask", command) for command in commands)


def deny(*commands: str) -> tuple[Case, ...]:
    return tuple(Case("deny", command) for command in commands)


def allow(*commands: str) -> tuple[Case, ...]:
    return tuple(Case("allow", command) for command in commands)
