"""Starting dsh with MCP servers configured, and calling their tools, for the mcp
plugin's tests.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh.llm import CallId, ToolCallBlock, joined_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import TOOLS
from dsh.tools import ToolContext, ToolService
from dsh_plugins.mcp import MCP, McpService
from tests.plugins.bash_support import eventually

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"
PY = sys.executable


def toml_string(text: str) -> str:
    return json.dumps(text)


def stdio_table(name: str, *args: str, extra: str = "") -> str:
    listed = ", ".join(toml_string(a) for a in args)
    return f"[mcp.servers.{name}]\ncommand = {toml_string(PY)}\nargs = [{listed}]\n{extra}\n"


async def started(root: Path, settings: str, *, trust: bool | None = None) -> Runtime:
    home, project = root / "home", root / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    (home / "settings.toml").write_text(settings)
    if trust is None:
        return await start_runtime(home=home, cwd=project)
    from dsh.settings import load_settings

    return await start_runtime(
        home=home, cwd=project, settings=load_settings(home, project, trust=trust)
    )


def service_of(runtime: Runtime) -> McpService:
    return runtime.root.get(MCP)


def tools_of(runtime: Runtime) -> ToolService:
    return runtime.root.get(TOOLS).service


def context(
    tmp_path: Path, progress: list[str] | None = None, signal: asyncio.Event | None = None
) -> ToolContext:
    return ToolContext(
        call_id=CallId("call-1"),
        agent=None,
        cwd=tmp_path,
        signal=signal or asyncio.Event(),
        progress=(progress.append if progress is not None else lambda _: None),
    )


async def call(
    runtime: Runtime, tmp_path: Path, name: str, arguments: dict[str, object], **kwargs: object
) -> tuple[str, str | None]:
    block = ToolCallBlock(id=CallId("call-1"), name=name, arguments=json.dumps(arguments))
    outcome = await tools_of(runtime).run(block, context(tmp_path, **kwargs), None)  # type: ignore[arg-type]
    return joined_text(outcome.message.result.content), outcome.error_code


async def until(predicate: Callable[[], object], what: str) -> None:
    try:
        await eventually(lambda: bool(predicate()))
    except AssertionError:
        pytest.fail(f"hung waiting for {what}")
