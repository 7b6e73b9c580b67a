"""Running ``rg`` for glob and grep: found once, started without a shell, stopped when
the turn is cancelled or the time is up, and never allowed to flood memory."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import shutil
import sys
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from dsh.processes import adopt, child_options
from dsh.tools import ToolError, child_environment

TIMEOUT_S = 30.0
MAX_RAW_BYTES = 20 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024


def find_rg() -> str:
    """The ``rg`` on PATH, else the one the ripgrep package installed (its own record
    of its files says where: beside this Python in a venv, elsewhere when dsh's
    dependencies live in another folder)."""
    found = shutil.which("rg")
    if found:
        return found
    for beside in (Path(sys.executable).parent / "rg", _packaged_rg()):
        if beside is not None and beside.is_file():
            return str(beside)
    raise ToolError(
        "ripgrep (rg) is not installed, so files cannot be searched; install ripgrep.",
        "SEARCH_FAILED",
    )


def _packaged_rg() -> Path | None:
    try:
        files = importlib.metadata.distribution("ripgrep").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((Path(str(f.locate())).resolve() for f in files if f.name == "rg"), None)


@dataclass(frozen=True)
class RgResult:
    code: int
    stdout: bytes
    stderr: str

    @property
    def problem(self) -> str:
        """rg's complaint, first lines only."""
        lines = [
            line.removeprefix("rg: ") for line in self.stderr.strip().splitlines() if line.strip()
        ]
        return "\n".join(lines[:8])


def is_pattern_error(stderr: str) -> bool:
    return any(
        sign in stderr
        for sign in ("regex parse error", "error parsing glob", "regex could not be compiled")
    ) or ("exceeds size limit" in stderr)


async def run_rg(
    args: list[str],
    *,
    cwd: Path,
    signal: asyncio.Event,
    budget_s: float = TIMEOUT_S,
    max_bytes: int = MAX_RAW_BYTES,
) -> RgResult:
    """Run ``rg args`` in ``cwd`` (an argument list; no shell ever parses it)."""
    # --no-config: a user's ripgreprc could change the output format we parse.
    process = await asyncio.create_subprocess_exec(
        find_rg(),
        "--no-config",
        *args,
        cwd=cwd,
        # Scrubbed like every child's: rg reads its own /proc/self/environ as a file.
        env=child_environment(os.environ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        **child_options(),
    )
    adopt(process.pid)
    work = asyncio.ensure_future(_collect(process, max_bytes))
    stop = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait(
            {work, stop}, timeout=budget_s, return_when=asyncio.FIRST_COMPLETED
        )
        if work in done:
            return work.result()
        if stop in done:
            raise ToolError("the search was cancelled.", "SEARCH_ABORTED")
        raise ToolError(
            f"the search did not finish within {budget_s:g} s and was stopped; narrow it "
            "with path, a more specific pattern, or include.",
            "TOOL_TIMEOUT",
        )
    finally:
        for task in (work, stop):
            task.cancel()
        if process.returncode is None:
            with suppress(ProcessLookupError):
                process.kill()
        await asyncio.gather(work, stop, return_exceptions=True)
        # Read what is left of the pipes (rg is gone or done, so they end at once): a
        # reader that stopped early (too much output) leaves its pipe paused, and on
        # Python 3.11 wait() returns only once every pipe of the process is closed.
        await asyncio.gather(_discard(process.stdout), _discard(process.stderr))
        await process.wait()


async def _collect(process: asyncio.subprocess.Process, max_bytes: int) -> RgResult:
    assert process.stdout is not None
    assert process.stderr is not None
    errors = asyncio.ensure_future(_drain(process.stderr, MAX_STDERR_BYTES))
    try:
        chunks: list[bytes] = []
        size = 0
        while chunk := await process.stdout.read(256 * 1024):
            size += len(chunk)
            if size > max_bytes:
                raise ToolError(
                    f"the search produced more than {max_bytes // (1024 * 1024)} MB of "
                    "output and was stopped; narrow it with path, include or a more "
                    "specific pattern.",
                    "SEARCH_RAW_OUTPUT_OVERFLOW",
                )
            chunks.append(chunk)
        stderr = await errors
    finally:
        errors.cancel()
    code = await process.wait()
    return RgResult(code, b"".join(chunks), stderr.decode("utf-8", errors="replace"))


async def _discard(stream: asyncio.StreamReader | None) -> None:
    if stream is not None:
        while await stream.read(256 * 1024):
            pass


async def _drain(stream: asyncio.StreamReader, keep: int) -> bytes:
    """All of ``stream`` read (so rg never blocks on a full pipe), its head kept."""
    kept = b""
    while chunk := await stream.read(64 * 1024):
        if len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return kept
