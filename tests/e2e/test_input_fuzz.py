"""The terminal input fuzzer's seeded cases (see :mod:`tests.e2e.input_fuzz`): each
types a random sequence into the real ``dsh`` in tmux and checks that what reached
the scripted server and what is left in the prompt box are what the reference
editor says. bench/input_fuzz.py runs thousands of seeds; a seed that failed is kept
in ``REGRESSIONS`` with what it found.

Steering is not modelled (the module's docstring says how the generator avoids it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.input_fuzz import generate, run_case
from tests.support.tmux import TMUX
from tests.support.waits import HANG_S

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

SEEDS = range(1, 9)
REGRESSIONS = {
    # Alt+Enter (ESC CR) read at once after another key: Textual's parser matched the
    # whole sequence, not the Alt path, and gave '^' then Enter (a send).
    3: "alt-enter-after-a-key",
    # Alt+Enter typed before raw mode (ESC LF in cooked mode), then a Tab send.
    2: "early-alt-enter-and-tab",
    # Enter, Enter, Enter as the first turn started: the second waited as a prompt,
    # the third steered the turn and went out before it.
    1869: "enter-enter-enter-as-a-turn-starts",
}


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_seeded_sequence_of_keys(tmp_path: Path, seed: int) -> None:
    await run_case(generate(1000 + seed), tmp_path, limit=HANG_S)


@pytest.mark.parametrize(
    "seed", sorted(REGRESSIONS), ids=[REGRESSIONS[s] for s in sorted(REGRESSIONS)]
)
async def test_a_seed_that_failed_once(tmp_path: Path, seed: int) -> None:
    await run_case(generate(seed), tmp_path, limit=HANG_S)
