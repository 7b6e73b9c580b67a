"""The TUI ends a session with the person's ``SessionEnd`` hooks: ``/new`` (reason
``clear``), ``/resume`` (``other``), quitting (``prompt_input_exit``)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from tests.ui.tui_support import finish_a_turn, make_runtime, tui, until

HOOK = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "hook.py"


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
async def hooked(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    command = json.dumps(f"{sys.executable} {HOOK} {tmp_path / 'end.jsonl'} ok")
    (tmp_path / "home" / "settings.toml").write_text(
        f"[[hooks.SessionEnd]]\nhooks = [{{ command = {command}, timeout = 30 }}]\n"
    )
    started = await make_runtime(tmp_path / "home", tmp_path, fake_llm)
    yield started
    await started.aclose()


async def test_new_resume_and_quit_end_the_session_with_the_hook(
    hooked: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    record = tmp_path / "end.jsonl"
    fake_llm.add(Reply(text="answer one"))
    async with tui(hooked, tmp_path, tmp_path / "home") as (app, pilot):
        await finish_a_turn(app, pilot, "the first session")
        first = app.agent.id
        await app.submit("/new")
        await until(pilot, lambda: len(records(record)) == 1, what="the SessionEnd hook")
        [cleared] = records(record)
        assert (cleared["hook_event_name"], cleared["reason"]) == ("SessionEnd", "clear")
        assert cleared["session_id"] == first
        second = app.agent.id
        await app.submit(f"/resume {first}")
        await until(pilot, lambda: len(records(record)) == 2, what="the second hook")
        assert records(record)[1]["session_id"] == second
        assert records(record)[1]["reason"] == "other"
        await app.quit()
    *_, quit_ = records(record)
    assert (quit_["session_id"], quit_["reason"]) == (first, "prompt_input_exit")
    assert len(records(record)) == 3
