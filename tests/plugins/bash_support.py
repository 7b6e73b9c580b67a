"""Shared set-up for the bash plugin tests: the plugin loaded on a real kernel context,
tool calls with a real ToolContext, and checks that a process group is really gone."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.llm import CallId, SessionId, UserMessage
from dsh.services import TOOLS
from dsh.tools import ToolContext, ToolOutput, ToolService
from dsh_plugins.bash import JOBS
from dsh_plugins.bash import plugin as bash_plugin
from dsh_plugins.bash.jobs import JobService
from dsh_plugins.bash.process import group_alive
from tests.support.waits import HANG_S

SESSION = "session-1"


class FakeAgent:
    """What the jobs service uses of an agent: its id, whether a turn would take a
    steered message now, ``steer`` and ``inject``."""

    def __init__(self, session_id: str = SESSION, *, busy: bool = False) -> None:
        self.id = session_id
        self.accepts_next_step = busy
        self.steered: list[UserMessage] = []
        self.injected: list[UserMessage] = []

    def steer(self, message: UserMessage) -> None:
        self.steered.append(message)

    def inject(self, message: UserMessage) -> None:
        self.injected.append(message)


@dataclass
class Harness:
    root: Context
    jobs: JobService
    tmp_path: Path
    spill_dir: Path
    agent: FakeAgent = field(default_factory=FakeAgent)
    _calls: Iterator[int] = field(default_factory=itertools.count)

    def context(
        self,
        *,
        session_id: str = SESSION,
        signal: asyncio.Event | None = None,
        agent: Any = None,
        spill: bool = True,
    ) -> ToolContext:
        return ToolContext(
            call_id=CallId(f"call-{next(self._calls)}"),
            agent=agent if agent is not None else self.agent,
            cwd=self.tmp_path,
            signal=signal if signal is not None else asyncio.Event(),
            session_id=SessionId(session_id),
            services=self.root,
            spill=self.spill if spill else None,
        )

    def spill(self, text: str, label: str) -> Path:
        path = self.spill_dir / f"{len(list(self.spill_dir.iterdir()))}-{label}.txt"
        path.write_text(text)
        return path

    async def call(
        self, tool: str, arguments: dict[str, Any], context: ToolContext | None = None
    ) -> ToolOutput:
        definition = self.root.get(TOOLS).get(tool)
        assert definition is not None, f"{tool} is not registered"
        parsed = definition.arguments.model_validate(arguments)
        result = await definition.execute(parsed, context or self.context())
        return ToolOutput(content=result) if isinstance(result, str) else result

    async def text(self, tool: str, arguments: dict[str, Any], **context: Any) -> str:
        output = await self.call(tool, arguments, self.context(**context) if context else None)
        assert isinstance(output.content, str)
        return output.content


@contextlib.asynccontextmanager
async def loaded(tmp_path: Path, config: dict[str, Any] | None = None) -> AsyncIterator[Harness]:
    root = Context(name="test")
    root.provide(TOOLS, ToolService(root))
    [record] = await PluginHost(root).load(
        [Candidate("bash", "test", plugin=bash_plugin)], configs={"bash": config or {}}
    )
    assert record.status is PluginStatus.LOADED, record.error
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    try:
        yield Harness(root, root.get(JOBS), tmp_path, spill_dir)
    finally:
        await root.dispose()


async def eventually(check: Callable[[], bool], seconds: float = HANG_S) -> None:
    """Wait until ``check()`` holds; ``seconds`` only guards against a hang."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.02)


async def read_pid(path: Path) -> int:
    await eventually(lambda: path.exists() and path.read_text().strip() != "")
    return int(path.read_text())


# -------------------------------------------------------------- process-group checks


def process_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def running_with(program: str, token: str) -> list[int]:
    """The PIDs (as this process sees them) of live ``program`` processes with
    ``token`` among their arguments: a sandboxed program's own ``os.getpid()`` is the
    one of its PID namespace, which names nothing (or another process) out here."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0] == program.encode() and token.encode() in argv and process_running(int(entry)):
            found.append(int(entry))
    return found


PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def subreaper() -> Iterator[bool]:
    """Make this process the reaper of orphaned descendants, so the grandchildren a test
    leaves behind are reaped here: where the container's init does not reap, their
    zombies would otherwise keep ``killpg(pgid, 0)`` succeeding for ever."""
    if not sys.platform.startswith("linux"):
        yield False
        return
    libc = ctypes.CDLL(None, use_errno=True)
    enabled = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield enabled
    finally:
        if enabled:
            libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


async def assert_group_gone(pgid: int) -> None:
    """No process of group ``pgid`` is left: none running, and (once the zombies the
    subreaper inherited are reaped) none at all, so ``killpg`` finds nobody.

    Waited for, not read once: the tool waits only so long for a killed group to go,
    and on a busy machine the kernel may not have scheduled its death by then."""
    await eventually(lambda: not group_alive(pgid))

    def reaped() -> bool:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-pgid, os.WNOHANG)[0] > 0:
                pass
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    await eventually(reaped)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
