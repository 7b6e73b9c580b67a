"""``dsh doctor``'s check of ``rg``, which glob and grep run: found, and it runs."""

from __future__ import annotations

import asyncio
import contextlib

from dsh.doctor import Check, DoctorAsk, fail, ok
from dsh.tools import ToolError
from dsh_plugins.fs.ripgrep import find_rg

FIX = "pip install ripgrep (beside dsh), or your system's ripgrep package"


async def rg_check(ask: DoctorAsk) -> list[Check]:
    try:
        program = await asyncio.to_thread(find_rg)
    except ToolError:
        return [fail("ripgrep", "rg", "not found: glob and grep cannot search", FIX)]
    try:
        child = await asyncio.create_subprocess_exec(
            program,
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as error:
        return [fail("ripgrep", "rg", f"{program} does not start: {error}", FIX)]
    try:
        async with asyncio.timeout(ask.timeout_s):
            out, _ = await child.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
        return [fail("ripgrep", "rg", f"{program} --version did not end", FIX)]
    if child.returncode != 0:
        return [fail("ripgrep", "rg", f"{program} --version exited {child.returncode}", FIX)]
    version = out.decode(errors="replace").splitlines()[0] if out else "rg"
    return [ok("ripgrep", "rg", f"{version} ({program})")]
