"""The ``--demo`` scenario plays through with the real tools, approvals and question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.demo import DemoError, bundled_scenario, start_demo
from dsh.llm import user_text
from dsh.runtime import start_runtime
from dsh.services import APPROVALS, QUESTIONS
from dsh.session import check_log
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.questions import Answer


async def test_the_demo_reads_edits_runs_asks_and_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = await start_demo(tmp_path)
    for name, value in demo.environment.items():
        monkeypatch.setenv(name, value)
    runtime = await start_runtime(
        home=demo.home, cwd=demo.project, plugin_configs=demo.plugin_configs
    )
    asked: list[str] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.tool_name)
        return ApprovalDecision(outcome="allow_once")

    async def answer(questions: Any, agent: Any) -> list[Answer]:
        return [Answer(id=questions[0].id, selected=["Yes"])]

    runtime.root.get(APPROVALS).add_approver(approve)
    runtime.root.get(QUESTIONS).set_answerer(answer)
    try:
        agent = await runtime.agents.create(demo.project)
        agent.followup(user_text(demo.prompt))
        await agent.when_idle()
        events = agent.session.events
        assert check_log(events) == []
        results = [e.data for e in events if e.type == "tool/result"]
        assert [r.error for r in results] == [None, None, None, None]
        assert asked == ["edit", "bash"]
        assert "Nice to see you" in (demo.project / "greet.py").read_text()
        bash_output = results[2].message.content[0].content[0].text
        assert "Hello, world! Nice to see you." in bash_output
        final = [e for e in events if e.type == "assistant/message"][-1]
        assert "That was the whole demo" in final.data.message.text()
    finally:
        await runtime.aclose()
        await demo.close()


async def test_the_demo_leaves_no_folder_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where mkdtemp makes its folder
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    demo = await start_demo()
    assert demo.project.is_relative_to(tmp_path)
    assert list(tmp_path.glob("dsh-demo-*"))
    await demo.close()
    assert list(tmp_path.glob("dsh-demo-*")) == []
    # A root the caller gave stays the caller's.
    given = tmp_path / "mine"
    demo = await start_demo(given)
    await demo.close()
    assert (given / "project" / "greet.py").exists()


async def test_a_demo_is_data_played_as_it_says(tmp_path: Path) -> None:
    """The scenario comes from a file the bundled plugins ship; ``{{server}}`` in its
    plugin settings becomes the scripted server's address, and its files stay inside
    its project."""
    scenario = bundled_scenario()
    assert scenario.script.replies
    assert scenario.files
    demo = await start_demo(tmp_path / "ok", scenario)
    try:
        configs = repr(demo.plugin_configs)
        assert "{{server}}" in repr(scenario.plugins)
        assert "{{server}}" not in configs
        assert demo.server.base_url in configs
        assert [p.name for p in demo.project.iterdir()] == list(scenario.files)
    finally:
        await demo.close()
    escaping = scenario.model_copy(update={"files": {"../outside.py": "x = 1\n"}})
    with pytest.raises(DemoError, match="outside its project"):
        await start_demo(tmp_path / "bad", escaping)
    assert not (tmp_path / "outside.py").exists()
    assert not (tmp_path / "bad").exists()
