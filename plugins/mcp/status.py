"""What the rest of the plugin knows of a server without the SDK: its status, and the
callbacks that register its tools and commands. (The SDK takes a good part of a second
to import; dsh imports it only when a server is configured, in a thread.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from dsh.commands import Command
from dsh.tools import ToolDefinition

State = Literal["starting", "ready", "failed", "needs login", "stopped", "disabled"]

Register = Callable[[str, ToolDefinition], Callable[[], object]]
RegisterCommand = Callable[[str, Command], Callable[[], object]]


@dataclass
class Status:
    """What a server is doing, for ``/mcp`` and ``dsh -p``'s stderr."""

    name: str
    where: str
    state: State
    reason: str | None = None
    stderr: str = ""
    tools: list[str] = field(default_factory=list)
