"""The core's own settings tables: what each key may hold, checked when settings load.

``[agent]`` is :class:`AgentOptions`, what each agent starts with (public as
``dsh.agent.AgentOptions``). Only pydantic and :mod:`dsh.wire` are imported here:
settings are checked before the runtime is built, by a module the runtime is built on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt

from dsh.wire import Frozen


class AgentOptions(Frozen):
    """``[agent]``: the provider, model and limits an agent starts with (a session
    resumed keeps its own route unless told otherwise)."""

    provider: str = "deepseek"
    model: str = "deepseek-v4-flash"
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: PositiveInt | None = None
    max_steps: PositiveInt | None = None
    """Steps one turn may take before it is ended with reason ``max-steps``."""


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
    copy_on_select: bool = True
    """Text selected in the transcript with the mouse is copied when the button is
    released; off, it is copied with Ctrl+C only."""
    notify: Literal["auto", "bell", "osc9", "osc777", "off"] = "auto"
    """How dsh calls you back while the terminal is not focused, when an approval or a
    question waits or a turn of 30 s or more ends: the terminal's bell, a desktop
    notification by OSC 9 or OSC 777 (wrapped for tmux's passthrough inside tmux), or
    nothing. ``auto`` sends OSC 9 to iTerm2, WezTerm, kitty and Ghostty, OSC 777 to
    foot, and rings the bell elsewhere (tmux and screen included)."""
