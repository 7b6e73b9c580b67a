"""A cancel the log does not mark, replayed where the loop saw it: one that came as the
last answer's stream ended (a TUI closed as the answer arrived) stops a turn whose
answer is whole, and the replay stops it there too, not after the turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh.llm import Finish, user_text
from dsh.replay.compare import compare
from dsh.replay.recorded import ChunkPoint, read_recording
from dsh.replay.run import ReplayOptions, replay
from dsh.runtime import start_runtime
from dsh.session import SessionEvent, TurnAborted, TurnEnd
from dsh.session.payloads import AssistantChunk, CancelByUser
from dsh.settings import load_settings
from dsh.testing import FakeLLM, Reply
from tests.support.vocabulary import async_plugin_vocabulary
from tests.support.waits import HANG_S


async def test_a_cancel_as_the_answer_ended_replays_there(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    settings = (
        f'[plugins.llm-deepseek]\nbase_url = "{fake_llm.base_url}"\n'
        "[plugins.title]\ngenerate = false\n"
    )
    (home / "settings.toml").write_text(settings)
    fake_llm.add(Reply(text="A whole answer."), Reply(text="Second."))
    runtime = await start_runtime(
        home=home, cwd=project, settings=load_settings(home, project, trust=True)
    )
    try:
        agent = await runtime.agents.create(project)

        def close_as_it_ends(event: SessionEvent) -> None:
            # The person's cancel lands once the answer's finish is logged, before the
            # loop has looked at the answer (what a front end closing then does).
            data = event.data
            ended = isinstance(data, AssistantChunk) and isinstance(data.chunk, Finish)
            if ended and isinstance(data, AssistantChunk) and data.turn == 1:
                agent.cancel(CancelByUser())

        agent.session.subscribe(close_as_it_ends)
        agent.followup(user_text("first"))
        await asyncio.wait_for(agent.when_idle(), HANG_S)
        agent.followup(user_text("second"))
        await asyncio.wait_for(agent.when_idle(), HANG_S)
        header, events = agent.session.header, list(agent.session.events)
    finally:
        await runtime.aclose()
    first, second = [e.data for e in events if isinstance(e.data, TurnEnd)]
    assert isinstance(first.reason, TurnAborted)  # stopped, though its answer was whole
    assert second.reason.kind == "completed"

    async with async_plugin_vocabulary():
        recording = read_recording(header, events)
        assert ChunkPoint(0, len(recording.requests[0].chunks)) in recording.inputs
        report = compare(await replay(recording, ReplayOptions(settings=settings)))
    assert report.identical, report.text()
