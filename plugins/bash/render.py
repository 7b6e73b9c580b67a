"""What the model reads of a finished command.

::

    [output truncated; full output: <path>]       (when stdout outgrew memory)
    <stdout>                                      (from its first whole line)
    [stderr]
    <stderr>
    [timed out after <ms>ms]
    [killed by signal: SIGKILL] | [exit code: N]  (last; nothing for exit 0)

``(no output)`` stands in for both streams when neither printed a byte.
"""

from __future__ import annotations

import signal

from dsh_plugins.bash.capture import StreamCapture


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_marker(returncode: int | None) -> str | None:
    if returncode is None or returncode == 0:
        return None
    if returncode < 0:
        return f"[killed by signal: {signal_name(-returncode)}]"
    return f"[exit code: {returncode}]"


def stream_section(text: str, notes: list[str]) -> list[str]:
    # The final newline is the line's end, not an empty line of output. What says the
    # start was cut comes first, where the cut is.
    return [*notes, text[:-1] if text.endswith("\n") else text]


def render_output(stdout: StreamCapture, stderr: StreamCapture, markers: list[str]) -> str:
    lines: list[str] = []
    if stdout.total:
        lines += stream_section(stdout.text(), stdout.notes())
    if stderr.total:
        lines += ["[stderr]", *stream_section(stderr.text(), stderr.notes())]
    if not stdout.total and not stderr.total:
        lines.append("(no output)")
    lines += markers
    return "\n".join(lines)


def final_markers(*, timed_out_ms: int | None, returncode: int | None) -> list[str]:
    markers = []
    if timed_out_ms is not None:
        markers.append(f"[timed out after {timed_out_ms}ms]")
    exit_line = exit_marker(returncode)
    if exit_line is not None:
        markers.append(exit_line)
    return markers
