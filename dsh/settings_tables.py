"""The core's own settings tables beyond ``[agent]`` (which is
:class:`dsh.agent.AgentOptions`): what each key may hold, checked when settings load."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class PermissionsTable(BaseModel):
    """``[permissions]``: the mode, and rules such as ``bash(git status)`` or ``edit(src/**)``."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["read-only", "default", "accept-edits", "bypass"] = "default"
    allow: list[str] = []
    deny: list[str] = []


class TuiTable(BaseModel):
    """``[tui]``: the interactive UI."""

    model_config = ConfigDict(extra="forbid")

    theme: str = "dsh-dark"
    mouse: bool = True
    """Off lets the terminal's own selection work (the app then ignores the mouse)."""
