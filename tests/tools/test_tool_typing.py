"""A type checker holds a tool's ``execute`` and ``describe`` to its arguments model."""

from __future__ import annotations

from pathlib import Path

from tests.support.typing_samples import assert_refused_lines

SAMPLE = Path(__file__).with_name("tool_typing_sample.py")


def test_a_tool_function_for_another_model_is_a_type_error(tmp_path: Path) -> None:
    assert_refused_lines(SAMPLE, tmp_path)
