"""What dsh adds to an MCP tool call: the fixture server's ``echo`` called through the
SDK's client session alone, then as the dsh tool ``mcp__fixture__echo`` through the
tool pipeline (argument parsing and validation, describe, spill check, the result
as text), over the same stdio connection kind.

Target: a call through dsh takes at most 5 ms longer than the SDK's own call (the
server's time and the pipe's). A run takes the median of 200 calls each way (after
20 to warm up) and their difference; the figure is the median of 5 runs' differences.

Run: .venv/bin/python bench/mcp_calls.py (not mcp.py: it would shadow the SDK)
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from mcp import ClientSession, StdioServerParameters, stdio_client
from report import RUNS, Sample, figure, load_now, machine  # bench/report.py, beside this script

from dsh.llm import CallId, ToolCallBlock
from dsh.runtime import start_runtime
from dsh.services import TOOLS
from dsh.tools import ToolContext
from dsh_plugins.mcp import MCP

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "mcp" / "server.py"
TARGET = 0.005  # s
QUIET = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
CALLS, WARM = 200, 20


async def sdk_alone() -> float:
    parameters = StdioServerParameters(command=sys.executable, args=[str(FIXTURE), "stdio"])
    # The fixture warns about its odd tool name on stderr; opened before the loop runs.
    return await _sdk_calls(parameters, QUIET)


async def _sdk_calls(parameters: StdioServerParameters, quiet: TextIO) -> float:
    async with (
        stdio_client(parameters, errlog=quiet) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        times = []
        for n in range(WARM + CALLS):
            start = time.perf_counter()
            await session.call_tool("echo", {"text": f"hi {n}"})
            times.append(time.perf_counter() - start)
    return statistics.median(times[WARM:])


async def through_dsh() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "home").mkdir()
        (root / "home" / "settings.toml").write_text(
            f"[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\n"
            f'args = [{json.dumps(str(FIXTURE))}, "stdio"]\n'
        )
        start = time.perf_counter()
        runtime = await start_runtime(home=root / "home", cwd=root)
        try:
            await runtime.root.get(MCP).settled()
            ready = time.perf_counter() - start
            tools = runtime.root.get(TOOLS).service
            context = ToolContext(call_id=CallId("c"), agent=None, cwd=root, signal=asyncio.Event())
            times = []
            for n in range(WARM + CALLS):
                call = ToolCallBlock(
                    id=CallId(f"c{n}"),
                    name="mcp__fixture__echo",
                    arguments=json.dumps({"text": f"hi {n}"}),
                )
                start = time.perf_counter()
                await tools.run(call, context, None)
                times.append(time.perf_counter() - start)
        finally:
            await runtime.aclose()
    return statistics.median(times[WARM:]), ready


async def main() -> None:
    print(f"machine: {machine()}")
    load = load_now()
    alone, through, added, ready = [], [], [], []
    for _ in range(RUNS):
        sdk = await sdk_alone()
        dsh_call, started = await through_dsh()
        alone.append(sdk)
        through.append(dsh_call)
        added.append(dsh_call - sdk)
        ready.append(started)
    print(
        f"SDK alone, a call: {Sample(tuple(alone)).shown('ms', 2, 1000)}); through dsh: "
        f"{Sample(tuple(through)).shown('ms', 2, 1000)})"
    )
    print(
        f"runtime start to the server's tools registered (no target): {Sample(tuple(ready)).shown()})"
    )
    print(
        figure(
            f"MCP tool call, dsh's overhead over the SDK's call (each run the difference of "
            f"the medians of {CALLS} calls)",
            Sample(tuple(added)),
            target=TARGET * 1000,
            unit="ms",
            scale=1000,
            load=load,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
