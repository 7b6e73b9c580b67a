"""Checking a typing sample: mypy strict runs over a file whose lines that must be
refused end with ``# refused``, and must report an error on exactly those lines."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def assert_refused_lines(sample: Path, cache: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file=",
            f"--cache-dir={cache}",
            str(sample),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = {
        int(match.group(1))
        for match in re.finditer(rf"{re.escape(sample.name)}:(\d+): error:", result.stdout, re.M)
    }
    marked = {
        number
        for number, line in enumerate(sample.read_text().splitlines(), start=1)
        if line.endswith("# refused")
    }
    assert marked, "the sample lost its marked lines"
    assert errors == marked, result.stdout + result.stderr
