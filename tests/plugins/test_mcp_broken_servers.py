"""The mcp plugin with broken servers (one that exits, one that never answers, one
that prints to stdout), servers that die later, and dsh closing its servers.

Every wait is bounded by HANG_S (a hang guard, never a timing assertion).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import ClassVar

from dsh.control_chars import visible
from dsh_plugins.mcp.service import status_lines
from tests.plugins.bash_support import process_running, running_with
from tests.plugins.mcp_support import (
    FIXTURE,
    PY,
    call,
    service_of,
    started,
    stdio_table,
    tools_of,
    until,
)
from tests.support.waits import HANG_S


def server_pid(token: Path) -> int:
    """The PID of the one fixture server started with ``token`` among its arguments."""
    [pid] = running_with(PY, str(token))
    return pid


async def test_broken_servers_leave_dsh_working(tmp_path: Path) -> None:
    settings = (
        stdio_table("exits", "-c", "import sys; sys.stderr.write('bad config'); sys.exit(3)")
        + stdio_table("mute", "-c", "import time; time.sleep(600)", extra="startup_timeout = 1")
        + stdio_table(
            "chatty", "-c", "import time; print('hello from a server', flush=True); time.sleep(600)"
        )
        + stdio_table("fixture", str(FIXTURE), "stdio")
        + '[mcp.servers.missing]\ncommand = "/no/such/program"\n'
    )
    runtime = await started(tmp_path, settings)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        states = {s.name: s for s in service_of(runtime).statuses()}
        assert states["fixture"].state == "ready"
        assert states["exits"].state == "failed"
        assert "exited" in (states["exits"].reason or "")
        assert states["exits"].stderr == "bad config"
        assert states["mute"].state == "failed"
        assert states["mute"].reason == "no answer to initialize within 1 s"
        assert states["chatty"].state == "failed"
        assert "not MCP" in (states["chatty"].reason or "")
        assert states["missing"].state == "failed"
        assert states["missing"].reason == "no program '/no/such/program' found"
        names = [n for n in tools_of(runtime).visible(None) if n.startswith("mcp__")]
        assert names
        assert all(n.startswith("mcp__fixture__") for n in names)
        text, _ = await call(runtime, tmp_path, "mcp__fixture__echo", {"text": "still here"})
        assert text == "echo: still here"
    finally:
        await runtime.aclose()


async def test_closing_dsh_ends_the_servers(tmp_path: Path) -> None:
    pid_file = tmp_path / "project" / "pid"
    script = (
        "import os,sys,runpy; open(sys.argv[1],'w').write(str(os.getpid()));"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    runtime = await started(tmp_path, stdio_table("fixture", "-c", script, str(pid_file)))
    await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
    assert service_of(runtime).statuses()[0].state == "ready"
    pid = server_pid(pid_file)
    await runtime.aclose()
    assert not process_running(pid)


async def test_a_server_that_dies_later_is_failed_and_can_be_restarted(tmp_path: Path) -> None:
    pid_file = tmp_path / "project" / "pid"
    script = (
        "import os,sys,runpy; open(sys.argv[1],'w').write(str(os.getpid()));"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    runtime = await started(
        tmp_path,
        stdio_table("fixture", "-c", script, str(pid_file), extra="reconnect_attempts = 0"),
    )
    try:
        service = service_of(runtime)
        await asyncio.wait_for(service.settled(), HANG_S)
        os.kill(server_pid(pid_file), signal.SIGKILL)
        await until(lambda: service.statuses()[0].state == "failed", "the crash to be seen")
        assert service.statuses()[0].reason == "the server closed the connection (it exited?)"
        assert tools_of(runtime).get("mcp__fixture__echo") is None
        assert any("fixture: failed" in line for line in status_lines(service))

        pid_file.unlink()
        old = service.connections["fixture"]
        assert service.restart("fixture")
        await until(lambda: service.statuses()[0].state == "ready", "the restart")
        assert old.ctx.disposed  # nothing of the old connection is left running
        text, _ = await call(runtime, tmp_path, "mcp__fixture__echo", {"text": "back"})
        assert text == "echo: back"
        assert not service.restart("no-such-server")
    finally:
        await runtime.aclose()


async def test_a_server_that_dies_later_comes_back_by_itself(tmp_path: Path) -> None:
    pid_file = tmp_path / "project" / "pid"
    script = (
        "import os,sys,runpy; open(sys.argv[1],'w').write(str(os.getpid()));"
        f"sys.argv=[{str(FIXTURE)!r}, 'stdio']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    runtime = await started(tmp_path, stdio_table("fixture", "-c", script, str(pid_file)))
    try:
        service = service_of(runtime)
        await asyncio.wait_for(service.settled(), HANG_S)
        first = server_pid(pid_file)
        os.kill(first, signal.SIGKILL)

        def back() -> bool:
            return (
                running_with(PY, str(pid_file)) not in ([], [first])
                and service.statuses()[0].state == "ready"
                and tools_of(runtime).get("mcp__fixture__echo") is not None
            )

        await until(back, "the server to be started again")
        text, _ = await call(runtime, tmp_path, "mcp__fixture__echo", {"text": "again"})
        assert text == "echo: again"
    finally:
        await runtime.aclose()


def test_status_lines_show_server_text_safely() -> None:
    from dsh_plugins.mcp.status import Status

    class Fake:
        problems: ClassVar[list[str]] = ["settings.toml: mcp.servers.x: bad"]

        def statuses(self) -> list[Status]:
            return [
                Status("ok", "srv", "ready", tools=["mcp__ok__a", "mcp__ok__b"]),
                Status("bad", "srv2", "failed", reason="boom\x1b[31m", stderr="one\ntwo\x07"),
            ]

    lines = status_lines(Fake())  # type: ignore[arg-type]
    assert lines[0] == "settings.toml: mcp.servers.x: bad"
    assert lines[1] == "ok: ready, 2 tools (srv)"
    assert lines[2] == "bad: failed (srv2)"
    assert "\x1b" not in "".join(lines)
    assert "\x07" not in "".join(lines)
    assert lines[-2:] == ["  stderr: one", f"  stderr: two{visible(chr(7))}"]
