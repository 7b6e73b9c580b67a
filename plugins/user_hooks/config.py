"""The ``[hooks]`` table: commands to run at fixed points, in the shape other agents use.

    [[hooks.PreToolUse]]
    matcher = "Bash|Edit"          # the tool's name (dsh's or Claude Code's): a regular
                                   # expression, or "*"/"" for all
    hooks = [{ type = "command", command = "./check.sh", timeout = 30 }]

A project's table is read only in a trusted folder (the settings layer it in only
then, as every table that does not narrow).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "Notification",
    "SessionEnd",
)
DEFAULT_TIMEOUT = 60.0


class HookCommand(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["command"] = "command"
    command: str = Field(min_length=1)
    timeout: PositiveFloat = DEFAULT_TIMEOUT


class HookGroup(BaseModel):
    model_config = ConfigDict(extra="ignore")

    matcher: str = ""
    hooks: list[HookCommand] = Field(default_factory=list)


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str
    command: str
    timeout: float
    origin: str

    def matches(self, names: tuple[str, ...] | None) -> bool:
        """Whether the hook runs for a tool known by ``names`` (its own, then Claude
        Code's: ``("bash", "Bash")``), or a trigger; events without one: always."""
        if names is None or self.matcher in ("", "*"):
            return True
        for name in names:
            try:
                if re.fullmatch(self.matcher, name) is not None:
                    return True
            except re.error:
                if self.matcher == name:
                    return True
        return False


def read_hooks(table: Mapping[str, Any], origin: str) -> tuple[list[Hook], list[str]]:
    """The hooks ``table`` configures, and a line for each part that cannot be used."""
    hooks: list[Hook] = []
    problems: list[str] = []
    for event, groups in table.items():
        if event not in EVENTS:
            problems.append(f"{origin}: hooks.{event} is not a hook event ({', '.join(EVENTS)})")
            continue
        if not isinstance(groups, list):
            problems.append(f"{origin}: hooks.{event} must be a list of [[hooks.{event}]] tables")
            continue
        for index, raw in enumerate(groups):
            try:
                group = HookGroup.model_validate(raw)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                problems.append(f"{origin}: hooks.{event}[{index}] {where}: {first['msg']}")
                continue
            hooks += [
                Hook(event, group.matcher, hook.command, hook.timeout, origin)
                for hook in group.hooks
            ]
    return hooks, problems
