"""dsh.bulk: the cyclic collector paused while many objects are built, and back after."""

from __future__ import annotations

import gc
import threading

from dsh.bulk import collector_paused


def test_pauses_nest_and_the_collector_comes_back_after_the_last() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_failure_inside_still_brings_it_back() -> None:
    try:
        with collector_paused():
            raise ValueError("a corrupt log")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_in_threads() -> None:
    inside = threading.Barrier(2)
    leave = threading.Event()
    seen: list[bool] = []

    def load() -> None:
        with collector_paused():
            inside.wait(5)
            leave.wait(5)

    worker = threading.Thread(target=load)
    worker.start()
    with collector_paused():
        inside.wait(5)
    seen.append(gc.isenabled())  # the worker's pause still holds
    leave.set()
    worker.join(5)
    assert seen == [False]
    assert gc.isenabled()
