"""A foreground command run by the agent's command runner (an editor's terminal)
instead of here.

The call was allowed already (the pipeline asked before ``execute``); the runner only
decides where the command runs. Its result reads as a local run's: the output, then
``[timed out after …]``, ``[killed by signal: …]`` or ``[exit code: N]``, and a
cancelled turn ends the call as ``ABORTED``. The runner keeps the last
``TAIL_BYTES`` of the output, stdout and stderr together as the terminal showed them;
there is no spill file for what it dropped.
"""

from __future__ import annotations

from pathlib import Path

from dsh.sandbox import Wrapped
from dsh.tools import (
    CommandOutcome,
    CommandRun,
    CommandRunFailed,
    CommandRunner,
    ToolContext,
    ToolError,
    ToolOutput,
)
from dsh_plugins.bash.capture import TAIL_BYTES


def markers(outcome: CommandOutcome, timeout_ms: int) -> list[str]:
    lines = []
    if outcome.stopped == "timeout":
        lines.append(f"[timed out after {timeout_ms}ms]")
    if outcome.signal:
        lines.append(f"[killed by signal: {outcome.signal}]")
    elif outcome.exit_code:
        lines.append(f"[exit code: {outcome.exit_code}]")
    return lines


def rendered(outcome: CommandOutcome, timeout_ms: int | None) -> str:
    lines: list[str] = []
    if outcome.truncated:
        lines.append(f"[output truncated; {outcome.place or 'the runner'} kept the last part]")
    text = outcome.output
    if text:
        lines.append(text[:-1] if text.endswith("\n") else text)
    elif not outcome.truncated:
        lines.append("(no output)")
    if timeout_ms is not None:
        lines += markers(outcome, timeout_ms)
    return "\n".join(lines)


async def run_delegated(
    runner: CommandRunner,
    command: str,
    context: ToolContext,
    cwd: Path,
    env: dict[str, str],
    timeout_ms: int,
    *,
    wrapped: Wrapped | None = None,
) -> ToolOutput:
    """``wrapped``: the sandbox's command line for it, which the runner starts."""
    run = CommandRun(
        call_id=context.call_id,
        command=command,
        argv=tuple(wrapped.argv) if wrapped is not None and wrapped.sandboxed else None,
        cwd=cwd,
        env=wrapped.env if wrapped is not None else env,
        timeout_s=timeout_ms / 1000,
        output_limit=TAIL_BYTES,
        signal=context.signal,
    )
    try:
        outcome = await runner.run(run)
    except CommandRunFailed as failed:
        raise ToolError(f"The command did not run: {failed}", "BASH_RUNNER_FAILED") from None
    if outcome.stopped == "cancel":
        partial = rendered(outcome, None)
        raise ToolError(
            f"The command was cancelled after {outcome.duration_ms}ms.\n{partial}", "ABORTED"
        )
    meta: dict[str, object] = {
        "exitCode": outcome.exit_code if outcome.signal is None else None,
        "signal": outcome.signal,
        "timedOut": outcome.stopped == "timeout",
        "durationMs": outcome.duration_ms,
        "cwd": str(cwd),
        "spill": {},
        "ranIn": outcome.place,
    }
    return ToolOutput(content=rendered(outcome, timeout_ms), meta=meta)
