"""Calling the fs plugin's tools directly, as the tool pipeline would, on real files."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh.kernel import Context
from dsh.llm import CallId, SessionId
from dsh.tools import Action, ToolContext, ToolDefinition, ToolError, ToolOutput
from dsh_plugins.fs import fs_tools


@dataclass
class Fs:
    """The six tools sharing one state, a workspace, and a spill folder."""

    root: Path
    session: str = "session-a"
    spill_enabled: bool = True
    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    spilled: list[Path] = field(default_factory=list)
    services: Context | None = None
    """The calling agent's context (where a stand-in for the disk may be provided)."""

    def __post_init__(self) -> None:
        self.tools = {tool.name: tool for tool in fs_tools()}
        self.cwd.mkdir(exist_ok=True)

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    def spill(self, text: str, label: str) -> Path:
        folder = self.root / "spill"
        folder.mkdir(exist_ok=True)
        path = folder / f"{len(self.spilled)}-{label}.txt"
        path.write_text(text)
        self.spilled.append(path)
        return path

    def context(
        self, session: str | None = None, signal: asyncio.Event | None = None
    ) -> ToolContext:
        return ToolContext(
            call_id=CallId("call-1"),
            agent=None,
            cwd=self.cwd,
            signal=signal or asyncio.Event(),
            session_id=SessionId(session or self.session),
            spill=self.spill if self.spill_enabled else None,
            services=self.services,
        )

    def arguments(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.tools[name].arguments.model_validate(arguments)

    async def call(self, name: str, session: str | None = None, **arguments: Any) -> ToolOutput:
        tool = self.tools[name]
        result = await tool.execute(self.arguments(name, arguments), self.context(session))
        assert isinstance(result, ToolOutput)
        return result

    async def text(self, name: str, **arguments: Any) -> str:
        content = (await self.call(name, **arguments)).content
        assert isinstance(content, str)
        return content

    async def fails(
        self, name: str, code: str, session: str | None = None, **arguments: Any
    ) -> str:
        with pytest.raises(ToolError) as caught:
            await self.call(name, session, **arguments)
        assert caught.value.code == code, caught.value.message
        return caught.value.message

    async def describe(self, name: str, **arguments: Any) -> Action:
        tool = self.tools[name]
        return await tool.action(self.arguments(name, arguments), self.context())

    def file(self, relative: str, content: str | bytes = "") -> Path:
        path = self.cwd / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode())
        return path


def touch_at(path: Path, seconds: float) -> None:
    os.utime(path, (seconds, seconds))


def change_externally(path: Path, data: bytes) -> None:
    """Rewrite a file as another program would, making sure its version moves even on a
    filesystem with coarse timestamps."""
    before = path.stat().st_mtime_ns
    path.write_bytes(data)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))
