"""A test plugin that reports the peak memory of the dsh process it runs in.

When the plugin unloads (the runtime closing, just before the process exits) it
writes ``dsh-probe: vmhwm-kib <N>`` to stderr: the process's own peak resident set
(``VmHWM``), not counting the programs it started (rg, bash and what bash runs).
"""

from __future__ import annotations

import os
from pathlib import Path

from dsh.kernel import Context, Plugin

MARK = "dsh-probe: vmhwm-kib "


def peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def apply(ctx: Context, config: object) -> None:
    def report() -> None:
        os.write(2, f"{MARK}{peak_kib()}\n".encode())

    ctx.effect(lambda: report)


plugin = Plugin(name="rss-probe", apply=apply)
