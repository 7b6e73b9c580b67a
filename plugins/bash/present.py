"""How a bash call looks in a UI: the command, then its output tail and exit status."""

from __future__ import annotations

from typing import Any

from dsh.tools import CallResult, CommandView, Presentation, TextView

MARKERS = ("[exit code:", "[timed out after", "[killed by signal:")


def bash_call(arguments: dict[str, Any]) -> Presentation:
    return CommandView(
        command=str(arguments.get("command", "")),
        description=arguments.get("description") or None,
        cwd=arguments.get("workdir") or None,
    )


def bash_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
    command = str(arguments.get("command", ""))
    meta = result.meta if isinstance(result.meta, dict) else {}
    if meta.get("background"):
        return TextView(title=f"Background job {meta.get('jobId')}: {command}")
    lines = result.text.splitlines()
    while lines and lines[-1].startswith(MARKERS):  # shown as the exit pill instead
        lines.pop()
    return CommandView(
        command=command,
        description=arguments.get("description") or None,
        cwd=meta.get("cwd"),
        output="\n".join(lines),
        exit_code=meta.get("exitCode"),
        signal=meta.get("signal"),
        timed_out=bool(meta.get("timedOut")),
    )
