"""The fs and lsp plugins loaded on a real kernel context, over a copy of the fixture
project, with every tool call going through the real tool pipeline (so the lsp
plugin's edit post hook runs as it does in a session)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.llm import CallId, SessionId, ToolCallBlock
from dsh.sandbox import Sandbox
from dsh.services import SANDBOX, TOOLS
from dsh.settings_tables import SandboxTable
from dsh.tools import ToolContext, ToolService
from dsh_plugins.fs import plugin as fs_plugin
from dsh_plugins.lsp import LSP, LspService
from dsh_plugins.lsp import plugin as lsp_plugin
from tests.support.waits import HANG_S

FIXTURES = Path(__file__).parent
PROJECT = FIXTURES / "project"
FAKE_SERVER = FIXTURES / "fake_server.py"

# Only pyflakes reports: a developer's extra linters (pycodestyle, mccabe) stay quiet.
PYLSP_SETTINGS = {
    "pylsp": {
        "plugins": {
            "pyflakes": {"enabled": True},
            "pycodestyle": {"enabled": False},
            "mccabe": {"enabled": False},
            "pydocstyle": {"enabled": False},
            "flake8": {"enabled": False},
            "pylint": {"enabled": False},
        }
    }
}
# Generous bounds for slow machines: every wait ends as soon as the answer is in.
BASE_CONFIG: dict[str, Any] = {
    "servers": {"python": {"settings": PYLSP_SETTINGS}},
    "request_timeout_s": 20,
    "edit_diagnostics_wait_s": 10,
    "diagnostics_wait_s": 10,
}


@dataclass(frozen=True)
class Result:
    text: str
    code: str | None


@dataclass
class Session:
    """The plugins on one kernel context, and the project as working directory."""

    root: Context
    cwd: Path
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def service(self) -> LspService:
        service: LspService = self.root.get(LSP)
        return service

    async def run(self, tool: str, **arguments: Any) -> Result:
        call = ToolCallBlock(
            id=CallId(f"call-{next(self._ids)}"), name=tool, arguments=json.dumps(arguments)
        )
        context = ToolContext(
            call_id=call.id,
            agent=None,
            cwd=self.cwd,
            signal=asyncio.Event(),
            session_id=SessionId("session-lsp"),
            services=self.root,
        )
        outcome = await self.root.get(TOOLS).service.run(call, context, None)
        [block] = outcome.message.content[0].content
        return Result(block.text, outcome.error_code)

    async def ok(self, tool: str, **arguments: Any) -> str:
        result = await self.run(tool, **arguments)
        assert result.code is None, result.text
        return result.text

    async def fails(self, tool: str, code: str, **arguments: Any) -> str:
        result = await self.run(tool, **arguments)
        assert result.code == code, result.text
        return result.text

    async def lsp(self, operation: str, file_path: str = "", **arguments: Any) -> str:
        return await self.ok("lsp", operation=operation, file_path=file_path, **arguments)

    def pid(self) -> int:
        [status] = [s for s in self.service.status() if s.running]
        assert status.pid is not None
        return status.pid


@contextlib.asynccontextmanager
async def session(
    folder: Path,
    config: dict[str, Any] | None = None,
    *,
    with_fs: bool = True,
    sandbox: SandboxTable | None = None,
) -> AsyncIterator[Session]:
    """The plugins over a fresh copy of the project in ``folder``; disposed on exit.
    With ``sandbox``, the runtime's sandbox service as that table sets it."""
    cwd = folder / "project"
    shutil.copytree(PROJECT, cwd)
    root = Context(name="test")
    root.provide(TOOLS, ToolService(root))
    if sandbox is not None:
        contained = Sandbox(sandbox, sandbox.policy, root=cwd, home=folder / "dsh-home")
        root.provide(SANDBOX, contained)
        root.effect(lambda: contained.aclose)
    candidates = [Candidate("lsp", "test", plugin=lsp_plugin)]
    if with_fs:
        candidates.insert(0, Candidate("fs", "test", plugin=fs_plugin))
    records = await PluginHost(root).load(
        candidates, configs={"lsp": config if config is not None else BASE_CONFIG}
    )
    assert all(r.status is PluginStatus.LOADED for r in records), [r.error for r in records]
    try:
        yield Session(root, cwd)
    finally:
        await root.dispose()


async def eventually(check: Callable[[], bool], seconds: float = HANG_S) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.02)


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
