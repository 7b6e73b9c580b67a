"""A fork: the recorded conversation replayed up to a turn, then its later prompts sent
to another model for real (here the scripted server), to compare models on the same
history."""

from __future__ import annotations

import json

import pytest

from dsh.kernel import Context, discover, load_vocabularies
from dsh.replay.compare import compare
from dsh.replay.export import read_replay_file
from dsh.replay.recorded import read_recording
from dsh.replay.run import ReplayOptions, replay
from dsh.testing import FakeLLM, Reply
from dsh.testing.fake_llm import RecordedRequest
from tests.replay.test_recorded_sessions import FOLDER, SUBSTITUTIONS

SESSION = FOLDER / "tool-loops.json"


def _texts(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.body["messages"] if isinstance(m.get("content"), str)]


async def test_the_turns_after_the_fork_go_to_the_other_model_on_the_same_history(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    fake_llm.add(Reply(text="Pro: missing.txt is not there."))
    document = read_replay_file(SESSION)
    settings = document.settings
    for placeholder, value in SUBSTITUTIONS.items():
        settings = settings.replace(placeholder, value)
    settings += f"[plugins.llm-deepseek]\nbase_url = {json.dumps(fake_llm.base_url)}\n"
    vocabulary = Context(name="test-vocabulary")
    await load_vocabularies(vocabulary, discover())
    try:
        header, events = document.loaded(str(SESSION))
        recording = read_recording(header, events)
        options = ReplayOptions(settings=settings, live_after=1, model="deepseek-pro")
        run = await replay(recording, options)
    finally:
        await vocabulary.dispose()

    report = compare(run)
    assert report.identical, report.text()  # turn 1, replayed from the log, is the same
    [live] = fake_llm.chat_requests  # turn 2 alone reached a model
    assert live.body["model"] == "deepseek-pro"
    sent = _texts(live)
    assert sent[-1] == "and read missing.txt"
    assert "out.txt holds the count." in sent  # the recorded answer of turn 1
    assert [r.model for r in run.live_requests] == ["deepseek-pro"]
    said = "\n".join(report.notes)
    assert "turns after 1 went to deepseek-pro live (1 requests)" in said
    assert "turn 2: recorded answer 'That file does not exist.'" in said
    assert "deepseek-pro answered 'Pro: missing.txt is not there.'" in said
