"""A type checker holds listeners and dispatch calls to their hook's spec."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).with_name("hook_typing_sample.py")


def test_listeners_and_dispatches_that_do_not_fit_their_spec_are_type_errors(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file=",
            f"--cache-dir={tmp_path}",
            str(SAMPLE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = {
        int(match.group(1))
        for match in re.finditer(rf"{re.escape(SAMPLE.name)}:(\d+): error:", result.stdout, re.M)
    }
    marked = {
        number
        for number, line in enumerate(SAMPLE.read_text().splitlines(), start=1)
        if line.endswith("# refused")
    }
    assert marked, "the sample lost its marked lines"
    assert errors == marked, result.stdout + result.stderr
