"""The second-press rule Ctrl+C (quit) and Esc (rewind) share, on an injected clock."""

from __future__ import annotations

from dsh.ui.tui.key_actions import DoublePress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_second_press_within_the_window_counts() -> None:
    clock = Clock()
    key = DoublePress(1.0, clock)
    assert not key.press()
    clock.now += 0.5
    assert key.press()
    # The pair is spent: the next press starts another.
    clock.now += 0.1
    assert not key.press()


def test_a_press_after_the_window_starts_a_new_pair() -> None:
    clock = Clock()
    key = DoublePress(1.0, clock)
    assert not key.press()
    clock.now += 1.5
    assert not key.press()
    clock.now += 0.2
    assert key.press()


def test_a_press_that_did_something_else_is_not_the_first() -> None:
    clock = Clock()
    key = DoublePress(1.0, clock)
    assert not key.press()
    key.forget()  # e.g. it cancelled a turn instead
    clock.now += 0.1
    assert not key.press()


def test_the_first_press_ever_is_a_first_whatever_the_clock_says() -> None:
    assert not DoublePress(1.0, lambda: 0.0).press()
