"""What every benchmark prints: the machine it ran on, and met or MISSED per target."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def machine() -> str:
    """CPU model, cores, OS and Python, for the results table."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}"
    )
