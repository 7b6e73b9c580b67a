"""A type checker holds a tool's ``execute`` and ``describe`` to its arguments model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).with_name("tool_typing_sample.py")


def test_a_tool_function_for_another_model_is_a_type_error(tmp_path: Path) -> None:
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
