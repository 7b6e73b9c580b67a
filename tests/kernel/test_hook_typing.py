"""A type checker holds listeners and dispatch calls to their hook's spec."""

from __future__ import annotations

from pathlib import Path

from tests.support.typing_samples import assert_refused_lines

SAMPLE = Path(__file__).with_name("hook_typing_sample.py")


def test_listeners_and_dispatches_that_do_not_fit_their_spec_are_type_errors(
    tmp_path: Path,
) -> None:
    assert_refused_lines(SAMPLE, tmp_path)
