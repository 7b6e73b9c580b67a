"""``dsh doctor``'s check of the MCP servers: each configured one started and listed
its tools within the ask's timeout, or why not (its reason and last stderr line)."""

from __future__ import annotations

import asyncio

from dsh.control_chars import visible
from dsh.doctor import Check, DoctorAsk, fail, ok, warn
from dsh_plugins.mcp.service import McpService


async def mcp_checks(service: McpService, ask: DoctorAsk) -> list[Check]:
    checks = [
        fail("mcp", "mcp settings", visible(problem, one_line=True), "correct the [mcp] table")
        for problem in service.problems
    ]
    try:
        async with asyncio.timeout(ask.timeout_s):
            await service.settled()
    except TimeoutError:
        pass  # the servers still starting are said to be below
    for status in service.statuses():
        name = f"mcp {status.name}"
        where = visible(status.where, one_line=True)
        if status.state == "ready":
            count = len(status.tools)
            checks.append(ok("mcp", name, f"{count} tool{'s' * (count != 1)} ({where})"))
        elif status.state == "disabled":
            continue
        elif status.state == "needs login":
            checks.append(
                warn("mcp", name, f"needs login ({where})", f"`dsh mcp login {status.name}`")
            )
        elif status.state == "starting":
            checks.append(
                fail(
                    "mcp",
                    name,
                    f"not ready within {ask.timeout_s:g} s ({where})",
                    "check the server's command by hand, or give dsh doctor a longer --timeout",
                )
            )
        else:
            reason = visible(status.reason or status.state, one_line=True)
            tail = [line for line in status.stderr.splitlines() if line.strip()][-1:]
            if tail:
                reason += f"; stderr: {visible(tail[0], one_line=True)}"
            checks.append(
                fail(
                    "mcp",
                    name,
                    f"{status.state}: {reason} ({where})",
                    f"run its command by hand to see why, or correct [mcp.servers.{status.name}]",
                )
            )
    return checks
