"""The replay's working folder is as long as the recorded one: the loop measures the
prompts that name it (compaction's estimate, the output cap it lowers to fit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.replay.run import _work_folder

ROOT = Path("/tmp/dsh-replay-k2j4h5g6")


@pytest.mark.parametrize("extra", [5, 6, 40, 200, 201, 202, 203, 404, 405, 1000])
def test_a_recorded_folder_longer_than_the_scratch_root_is_matched_exactly(extra: int) -> None:
    recorded = "/" + "p" * (len(str(ROOT)) + extra - 1)
    work = _work_folder(ROOT, recorded)
    assert len(str(work)) == len(recorded)
    assert work.is_relative_to(ROOT)
    assert all(len(part) <= 255 for part in work.parts)


@pytest.mark.parametrize("recorded", [None, "/w", "/tmp/dsh-replay-k2j4h5g6/w"])
def test_a_shorter_recorded_folder_gets_the_plain_work_folder(recorded: str | None) -> None:
    assert _work_folder(ROOT, recorded) == ROOT / "work"
