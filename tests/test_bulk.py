"""dsh.bulk: the cyclic collector paused while many objects are built, and back after."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from dsh.bulk import collector_paused, pause_for_start_up, start_up_done
from dsh.ui.session_controller import SessionController
from dsh.ui.user_interface import SessionChoice


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


def test_start_up_pause_holds_until_the_runtime_is_up_then_freezes_what_it_built() -> None:
    frozen = gc.get_freeze_count()
    try:
        pause_for_start_up()
        pause_for_start_up()  # a second front end's call changes nothing
        with collector_paused():  # a long session's load inside start-up
            pass
        assert not gc.isenabled()
        start_up_done()
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen
        start_up_done()  # nothing paused: nothing to do
        assert gc.isenabled()
    finally:
        gc.unfreeze()


async def test_the_session_controller_ends_the_start_up_pause(tmp_path: Path) -> None:
    """``dsh``, ``dsh --plain`` and ``dsh -p`` pause the collector before their imports;
    the controller that starts their runtime brings it back, failed start or not."""
    from tests.ui.test_session_controller import Recorder

    (tmp_path / "project").mkdir()
    pause_for_start_up()
    controller = SessionController(
        Recorder(), SessionChoice(cwd=tmp_path / "project", home=tmp_path / "home")
    )
    try:
        await controller.start()
        assert gc.isenabled()
    finally:
        start_up_done()
        await controller.close()
        gc.unfreeze()
