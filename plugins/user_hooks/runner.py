"""Running one hook: ``bash -c COMMAND`` with the event's JSON on stdin.

The command runs in the session's folder, in a process group of its own that dies
with dsh, with ``DSH_PROJECT_DIR`` (and ``CLAUDE_PROJECT_DIR``, which existing scripts
read) set, and the environment its settings earn: a hook of the user's own settings
gets the user's environment without what looks like a secret (the user's
``[plugins.bash] env_passthrough`` names put back), a project's hook the scrubbed
environment commands get. What it prints is kept up to :data:`MAX_OUTPUT` bytes a stream. Past its
timeout the whole group is killed. Its answer is read as other agents' hooks give it:
exit 0 (stdout may be a JSON object with a ``decision``, a ``reason``,
``hookSpecificOutput``...), exit 2 (blocking: stderr says why), anything else (an
error shown to the person, nothing blocked).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh.held_secrets import looks_secret, passed_through
from dsh.processes import child_options
from dsh.sandbox import Sandbox, SandboxUnavailable, launch_options
from dsh.tools import child_environment, with_safe_git

MAX_OUTPUT = 64 * 1024
BLOCKING = 2


@dataclass(frozen=True)
class Ran:
    exit_code: int | None
    """None: killed at its timeout, or it could not start."""
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool = False

    @property
    def answer(self) -> dict[str, Any]:
        """The JSON object an exit-0 hook printed, or {} (plain text is no answer)."""
        if self.exit_code != 0:
            return {}
        text = self.stdout.strip()
        if not text.startswith("{"):
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


async def run_hook(
    command: str,
    payload: dict[str, Any],
    cwd: Path,
    limit_s: float,
    *,
    passthrough: tuple[str, ...] | None = None,
    sandbox: Sandbox | None = None,
) -> Ran:
    """Run one hook. ``passthrough``: the user's own list of secrets to pass on, for a
    hook of the user's own settings; None for a project's hook, which gets the
    scrubbed environment and none of the user's secrets. ``sandbox``: the one a
    project's hook runs in (None: outside, as the user's own hooks run)."""
    began = time.monotonic()
    env = (
        child_environment(os.environ)
        if passthrough is None
        else with_safe_git(
            {
                **{
                    name: value
                    for name, value in os.environ.items()
                    if not looks_secret(name, value)
                },
                **passed_through(passthrough),
            }
        )
    )
    env.update(DSH_PROJECT_DIR=str(cwd), CLAUDE_PROJECT_DIR=str(cwd))
    argv = ["bash", "-c", command]
    options = child_options()
    if sandbox is not None:
        try:
            wrapped = await sandbox.wrap(argv, cwd=cwd, env=env)
        except SandboxUnavailable as error:
            return Ran(None, "", f"not run: the sandbox cannot start ({error})", _since(began))
        argv, env, options = wrapped.argv, wrapped.env, launch_options(wrapped)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            **options,
        )
    except OSError as error:
        return Ran(None, "", f"could not start: {error}", _since(began))
    data = json.dumps(payload).encode()
    try:
        async with asyncio.timeout(limit_s):
            out, err = await process.communicate(data)
    except TimeoutError:
        _kill_group(process.pid)
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
        return Ran(None, "", f"killed after {limit_s:g} s", _since(began), timed_out=True)
    except BaseException:
        _kill_group(process.pid)
        raise
    return Ran(process.returncode, _text(out), _text(err), _since(began))


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _text(data: bytes) -> str:
    return data[:MAX_OUTPUT].decode("utf-8", errors="replace")


def _since(began: float) -> int:
    return int((time.monotonic() - began) * 1000)
