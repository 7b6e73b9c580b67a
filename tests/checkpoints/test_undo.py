"""``/undo`` through the real session controller and agent loop against the scripted
server: the preview, the confirmation, the conflict left alone, the model told, one
turn after another undone; and a restore cut short finished when the session is
resumed in a new runtime."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dsh.llm import PluginSource, user_text
from dsh.runtime import Runtime
from dsh.services import CHECKPOINTS
from dsh.session import RestoreDone, RestoreStarted, SessionStore
from dsh.session.payloads import CommandDone
from dsh.testing import FakeLLM, Reply
from dsh.ui.session_controller import SessionController
from dsh.ui.user_interface import SessionChoice
from tests.checkpoints.test_turns import bash, call, runtime_for
from tests.session.test_cli import dsh as cli
from tests.support.waits import HANG_S
from tests.ui.test_session_controller import Recorder


@dataclass
class Chooser(Recorder):
    """A front end that answers each ``choose`` from ``choices`` (None: closed)."""

    choices: list[int | None] = field(default_factory=list)
    asked: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        self.asked.append((title, tuple(items)))
        return self.choices.pop(0)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "keep.txt").write_bytes(b"keep\n")
    (root / "doomed.txt").write_bytes(b"doomed\n")
    (root / "hand.txt").write_bytes(b"hand 1\n")
    return root


async def open_controller(runtime: Runtime, root: Path, ui: Recorder) -> SessionController:
    controller = SessionController(ui, SessionChoice(cwd=root), runtime=runtime)
    await controller.start()
    assert await controller.open_first(new_if_none=True)
    controller.add_session_commands("", lambda: None)
    return controller


async def turn(controller: SessionController, prompt: str) -> None:
    agent = controller.agent
    assert agent is not None
    agent.followup(user_text(prompt))
    await asyncio.wait_for(agent.when_idle(), HANG_S)


async def test_undo_previews_asks_restores_and_tells_the_model(
    project: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime = await runtime_for(project, tmp_path / "home", fake_llm)
    ui = Chooser(kind="plain", choices=[1, None, 0])
    try:
        controller = await open_controller(runtime, project, ui)
        fake_llm.add(
            Reply(
                tool_calls=[
                    call("write", file_path="made.txt", content="made\n"),
                    bash("rm doomed.txt && echo turn > hand.txt && chmod 600 keep.txt"),
                ]
            ),
            Reply(text="done"),
        )
        await turn(controller, "change things")
        agent = controller.agent
        assert agent is not None
        (project / "hand.txt").write_bytes(b"by hand\n")  # after the turn: a conflict
        after = {p.name: p.read_bytes() for p in project.iterdir()}

        await controller.submit("/undo --dry-run")
        preview = ui.said("info")[-2]
        assert "Restoring the files to before turn 1: 3 files." in preview
        assert "  remove   made.txt  -0 +1" not in preview  # lines said as restored, not as done
        assert "  remove   made.txt  +0 -1" in preview
        assert "  recreate doomed.txt  +1 -0" in preview
        assert "  mode     keep.txt  permissions" in preview
        assert "Conflicts, changed by hand since and left alone: hand.txt" in preview
        assert "a network call, a database write" in preview
        assert ui.said("info")[-1] == "Dry run: nothing was restored."
        assert ui.asked == []
        assert {p.name: p.read_bytes() for p in project.iterdir()} == after

        for _ in range(2):  # "Cancel", then the list closed: nothing either time
            await controller.submit("/undo")
            assert ui.said("info")[-1] == "Nothing was restored."
            assert {p.name: p.read_bytes() for p in project.iterdir()} == after
        assert ui.asked[0] == ("Restore these files?", ("Restore the files", "Cancel"))

        await controller.submit("/undo")
        assert ui.said("info")[-1] == (
            "Restored 3 files to before turn 1. Left alone (changed by hand): hand.txt."
        )
        assert sorted(p.name for p in project.iterdir()) == ["doomed.txt", "hand.txt", "keep.txt"]
        assert (project / "doomed.txt").read_bytes() == b"doomed\n"
        assert (project / "hand.txt").read_bytes() == b"by hand\n"
        assert (project / "keep.txt").stat().st_mode & 0o777 == 0o644

        notes = [
            e.data
            for e in agent.session.events
            if e.type == "user/message" and isinstance(e.data.source, PluginSource)
            and e.data.source.form == "notice"
        ]  # fmt: skip
        assert "undid turn 1's changes to the files" in notes[-1].text()
        fake_llm.add(Reply(text="ok"))
        await turn(controller, "what now?")
        sent = str(fake_llm.chat_requests[-1].body["messages"])
        assert "undid turn 1" in sent  # the next request tells the model

        await controller.submit("/undo")  # turn 2 changed nothing, turn 1 is undone
        done = [e.data for e in agent.session.events if isinstance(e.data, CommandDone)]
        assert done[-1].kind == "error"
        assert "nothing to undo" in (done[-1].text or "")
        await controller.close()
    finally:
        await runtime.aclose()


async def test_headless_undo_needs_no_answer_and_goes_back_turn_by_turn(
    project: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime = await runtime_for(project, tmp_path / "home", fake_llm)
    ui = Chooser(kind="headless", choices=[None, None], attended=False)
    try:
        controller = await open_controller(runtime, project, ui)
        fake_llm.add(Reply(tool_calls=[bash("echo one > keep.txt")]), Reply(text="1"))
        await turn(controller, "first")
        fake_llm.add(
            Reply(tool_calls=[bash("echo two > keep.txt; rm doomed.txt")]), Reply(text="2")
        )
        await turn(controller, "second")
        assert (project / "keep.txt").read_bytes() == b"two\n"

        await controller.submit("/undo")
        assert (project / "keep.txt").read_bytes() == b"one\n"
        assert (project / "doomed.txt").read_bytes() == b"doomed\n"
        await controller.submit("/undo")
        assert (project / "keep.txt").read_bytes() == b"keep\n"
        assert ui.said("info")[-1] == "Restored 1 file to before turn 1."
        await controller.close()
    finally:
        await runtime.aclose()


async def test_a_restore_cut_short_is_finished_on_resume(
    project: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    runtime = await runtime_for(project, home, fake_llm)
    try:
        fake_llm.add(
            Reply(tool_calls=[bash("echo new > keep.txt; rm doomed.txt")]), Reply(text="ok")
        )
        agent = await runtime.agents.create(project)
        agent.followup(user_text("change"))
        await asyncio.wait_for(agent.when_idle(), HANG_S)
        checkpoints = runtime.root.get(CHECKPOINTS)
        plan = await checkpoints.plan_undo(agent)
        assert plan is not None
        # What a process killed just after logging the restore leaves: the event,
        # synced, and no file touched.
        agent.session.append(
            "checkpoint/restoring",
            RestoreStarted(
                restore_id="cut", purpose="undo", turn=plan.turn, target=plan.target,
                writes=plan.writes, conflicts=plan.conflicts,
            ),
        )  # fmt: skip
        assert await agent.flush()
        session_id = agent.id
    finally:
        await runtime.aclose()
    assert (project / "keep.txt").read_bytes() == b"new\n"

    runtime = await runtime_for(project, home, fake_llm)
    try:
        resumed = await runtime.agents.resume(session_id, cwd=project)
        assert (project / "keep.txt").read_bytes() == b"keep\n"
        assert (project / "doomed.txt").read_bytes() == b"doomed\n"
        done = [e.data for e in resumed.session.events if isinstance(e.data, RestoreDone)]
        assert len(done) == 1
        assert done[0].restore_id == "cut"
        assert done[0].resumed
        assert sorted(done[0].applied) == ["doomed.txt", "keep.txt"]
        assert await runtime.root.get(CHECKPOINTS).finish_interrupted(resumed) is None
    finally:
        await runtime.aclose()


async def test_fork_at_a_turn_with_code_puts_the_files_back_as_that_turn_left_them(
    project: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    runtime = await runtime_for(project, tmp_path / "home", fake_llm)
    # /fork 1 --code: "Leave them" the first time, "Restore the files" the second.
    ui = Chooser(kind="plain", choices=[1, 0])
    try:
        controller = await open_controller(runtime, project, ui)
        fake_llm.add(Reply(tool_calls=[bash("echo one > keep.txt")]), Reply(text="1"))
        await turn(controller, "first")
        fake_llm.add(
            Reply(tool_calls=[bash("echo two > keep.txt; rm doomed.txt; echo t > hand.txt")]),
            Reply(text="2"),
        )
        await turn(controller, "second")
        (project / "hand.txt").write_bytes(b"by hand\n")  # a conflict, left alone
        source = controller.agent
        assert source is not None

        await controller.submit("/fork 1 --code")
        first_fork = controller.agent
        assert first_fork is not None
        assert first_fork.id != source.id
        assert ui.said("info")[-1] == "The files were left as they are."
        assert (project / "keep.txt").read_bytes() == b"two\n"

        await controller.open_session(str(source.id))
        await controller.submit("/fork 1 --code")
        fork = controller.agent
        assert fork is not None
        assert fork.id not in (source.id, first_fork.id)
        preview = ui.said("info")[-3]
        assert "Conflicts, changed by hand since and left alone: hand.txt" in preview
        assert ui.said("info")[-1] == (
            "Restored 2 file(s) as turn 1 left them. Left alone (changed by hand): hand.txt."
        )
        assert (project / "keep.txt").read_bytes() == b"one\n"
        assert (project / "doomed.txt").read_bytes() == b"doomed\n"
        assert (project / "hand.txt").read_bytes() == b"by hand\n"
        # The restore is the fork's, and so is the note the model gets next.
        assert any(isinstance(e.data, RestoreDone) for e in fork.session.events)
        assert not any(isinstance(e.data, RestoreStarted) for e in source.session.events)
        fake_llm.add(Reply(text="ok"))
        await turn(controller, "go on")
        sent = str(fake_llm.chat_requests[-1].body["messages"])
        assert "forked this session at turn 1" in sent
        assert "second" not in sent
        await controller.close()
    finally:
        await runtime.aclose()


async def test_sessions_fork_with_code_restores_the_files_into_the_fork(
    project: Path, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    runtime = await runtime_for(project, home, fake_llm)
    try:
        agent = await runtime.agents.create(project)
        fake_llm.add(Reply(tool_calls=[bash("echo one > keep.txt")]), Reply(text="1"))
        agent.followup(user_text("first"))
        await asyncio.wait_for(agent.when_idle(), HANG_S)
        fake_llm.add(
            Reply(tool_calls=[bash("echo two > keep.txt; rm doomed.txt; echo t > hand.txt")]),
            Reply(text="2"),
        )
        agent.followup(user_text("second"))
        await asyncio.wait_for(agent.when_idle(), HANG_S)
        source_id = str(agent.id)
    finally:
        await runtime.aclose()
    (project / "hand.txt").write_bytes(b"by hand\n")

    result = cli(home, "fork", source_id[:8], "--at", "1", "--code", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Conflicts, changed by hand since and left alone: hand.txt" in result.stdout
    assert "Restored 2 file(s) as turn 1 left them." in result.stdout
    assert (project / "keep.txt").read_bytes() == b"one\n"
    assert (project / "doomed.txt").read_bytes() == b"doomed\n"
    assert (project / "hand.txt").read_bytes() == b"by hand\n"
    fork_id = result.stdout.split("into ")[1].split(".")[0]

    store = SessionStore.at(home)
    try:
        fork = await store.open(fork_id)
        assert any(isinstance(e.data, RestoreDone) for e in fork.events)
        assert "forked this session at turn 1" in fork.derive_messages()[-1].text()
        await store.close(fork)
    finally:
        await store.aclose()


@pytest.mark.parametrize("cut", ["before-any-file", "after-the-files", "failed"])
async def test_a_rewind_cut_short_rewinds_the_conversation_on_resume(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, cut: str
) -> None:
    """``/rewind N`` of code and conversation killed before the conversation's rewind
    was logged: the next process to resume the session finishes both."""
    home = tmp_path / "home"
    runtime = await runtime_for(project, home, fake_llm)
    try:
        agent = await runtime.agents.create(project)
        for prompt, command in [("first", "echo one > keep.txt"), ("second", "rm doomed.txt")]:
            fake_llm.add(Reply(tool_calls=[bash(command)]), Reply(text=prompt))
            agent.followup(user_text(prompt))
            await asyncio.wait_for(agent.when_idle(), HANG_S)
        checkpoints = runtime.root.get(CHECKPOINTS)
        plan = await checkpoints.plan_rewind(agent, 2)
        assert plan is not None
        if cut == "failed":  # the files could not be restored: /rewind stopped there
            restore_id = "failed"
            for event, data in [
                ("checkpoint/restoring", RestoreStarted(
                    restore_id=restore_id, purpose="rewind", turn=2, target=plan.target,
                    writes=plan.writes, conflicts=plan.conflicts, conversation=True,
                )),
                ("checkpoint/restored", RestoreDone(restore_id=restore_id, error="disk full")),
            ]:  # fmt: skip
                agent.session.append(event, data)
        elif cut == "after-the-files":
            outcome = await checkpoints.restore(agent, plan, conversation=True)
            restore_id = outcome.restore_id
            assert (project / "doomed.txt").exists()
        else:
            restore_id = "cut"
            agent.session.append(
                "checkpoint/restoring",
                RestoreStarted(
                    restore_id=restore_id, purpose="rewind", turn=2, target=plan.target,
                    writes=plan.writes, conflicts=plan.conflicts, conversation=True,
                ),
            )  # fmt: skip
        assert await agent.flush()
        session_id = agent.id
    finally:
        await runtime.aclose()

    runtime = await runtime_for(project, home, fake_llm)
    try:
        resumed = await runtime.agents.resume(session_id, cwd=project)
        if cut == "failed":
            assert not [e for e in resumed.session.events if e.type == "history/rewound"]
            assert not (project / "doomed.txt").exists()
            return
        assert (project / "doomed.txt").read_bytes() == b"doomed\n"
        assert (project / "keep.txt").read_bytes() == b"one\n"
        [rewound] = [e.data for e in resumed.session.events if e.type == "history/rewound"]
        assert rewound.turn == 2
        assert rewound.restore_id == restore_id
        said = [m.text() for m in resumed.session.derive_messages()]
        assert "first" in said
        assert "second" not in said
    finally:
        await runtime.aclose()

    runtime = await runtime_for(project, home, fake_llm)
    try:  # and only once
        again = await runtime.agents.resume(session_id, cwd=project)
        assert len([e for e in again.session.events if e.type == "history/rewound"]) == 1
    finally:
        await runtime.aclose()
