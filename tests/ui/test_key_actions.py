"""The second-press rule Ctrl+C (quit) and Esc (rewind) share, on an injected clock."""

from __future__ import annotations

import pytest

from dsh.ui.tui import key_actions
from dsh.ui.tui.key_actions import DoublePress


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(key_actions.time, "monotonic", lambda: now[0])
    return now


def test_a_second_press_within_the_window_counts(clock: list[float]) -> None:
    key = DoublePress(1.0)
    assert not key.press()
    clock[0] += 0.5
    assert key.press()
    # The pair is spent: the next press starts another.
    clock[0] += 0.1
    assert not key.press()


def test_a_press_after_the_window_starts_a_new_pair(clock: list[float]) -> None:
    key = DoublePress(1.0)
    assert not key.press()
    clock[0] += 1.5
    assert not key.press()
    clock[0] += 0.2
    assert key.press()


def test_a_press_that_did_something_else_is_not_the_first(clock: list[float]) -> None:
    key = DoublePress(1.0)
    assert not key.press()
    key.forget()  # e.g. it cancelled a turn instead
    clock[0] += 0.1
    assert not key.press()
