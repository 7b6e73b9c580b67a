"""Plain mode fed a script on stdin, as a child process: what a pipe, a log or a
program driving ``dsh --plain`` sees."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # seconds: generous for a loaded machine, never reached when sound
RUN_PLAIN = (
    "import asyncio, sys; from dsh.ui.plain import PlainRequest, run_plain; "
    "sys.exit(asyncio.run(run_plain(PlainRequest())))"
)


async def run_plain_script(
    cwd: Path, script: bytes, env: Mapping[str, str | None]
) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of plain mode reading ``script``, in ``cwd``,
    with ``env`` over this process's environment (None removes a variable)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RUN_PLAIN,
        cwd=cwd,
        env={name: value for name, value in environ.items() if value is not None},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(child.communicate(script), TIMEOUT)
    except TimeoutError:
        child.kill()
        raise AssertionError(f"plain mode did not finish within {TIMEOUT} s") from None
    assert child.returncode is not None
    return child.returncode, out.decode(), err.decode()
