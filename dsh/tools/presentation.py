"""How a tool call looks in a UI: small, UI-neutral views a tool's plugin builds from
the call's arguments and its logged result.

A tool may set ``present_call(arguments)`` (shown while the call waits or runs) and
``present_result(arguments, result)`` (shown once it ended) on its
:class:`~dsh.tools.definition.ToolDefinition`. Both are pure functions of what the
session log holds (the raw arguments, the result text, its error code and the tool's
``meta``), so a resumed session shows the same cards as a live one. The TUI and the
plain line mode render these views; a tool without presenters gets a generic card.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias


@dataclass(frozen=True)
class CallResult:
    """What a presenter may read of a finished call (all of it from the log)."""

    text: str
    is_error: bool = False
    error_code: str | None = None
    meta: Any = None


@dataclass(frozen=True)
class TextView:
    """A title and, optionally, a body: plain text, or code when ``language`` is set."""

    title: str
    body: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class CommandView:
    """A shell command and, once it ran, the tail of its output and how it ended."""

    command: str
    description: str | None = None
    cwd: str | None = None
    output: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False


@dataclass(frozen=True)
class FileDiff:
    path: str
    diff: str
    """A unified diff of the file (``---``/``+++`` headers and ``@@`` hunks)."""
    added: int = 0
    removed: int = 0


@dataclass(frozen=True)
class DiffView:
    title: str
    files: tuple[FileDiff, ...] = ()


@dataclass(frozen=True)
class ScreenView:
    """A terminal's rendered screen: its rows and where the cursor is (0-based)."""

    title: str
    rows: tuple[str, ...] = ()
    cursor: tuple[int, int] | None = None
    status: str | None = None


ChecklistStatus = Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True)
class ChecklistView:
    title: str
    items: tuple[tuple[str, ChecklistStatus], ...] = ()


@dataclass(frozen=True)
class AgentView:
    """A child agent's run: the last of its activity and the session holding it. The
    TUI opens ``session_id`` as its own transcript from the card."""

    title: str
    session_id: str
    status: str | None = None
    """How the run stands or ended, in a word or two (``running``, ``completed``)."""
    lines: tuple[str, ...] = ()
    """Its latest activity, oldest first: a UI shows the last few."""


Presentation: TypeAlias = TextView | CommandView | DiffView | ScreenView | ChecklistView | AgentView
