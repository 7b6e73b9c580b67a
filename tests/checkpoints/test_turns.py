"""Checkpoints through the real agent loop against the scripted server: every call
with effects is preceded by a snapshot (commands too), the turn's end lists its
changes, and the trees hold the files' exact bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh.checkpoints.store import CheckpointStore
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import CHECKPOINTS
from dsh.session import CheckpointTaken, RestoreDone, RestoreStarted
from dsh.testing import FakeLLM, Reply
from dsh.testing.script import ToolCallSpec


def call(name: str, **arguments: object) -> ToolCallSpec:
    return ToolCallSpec(name=name, arguments=arguments)


def bash(command: str) -> ToolCallSpec:
    return call("bash", command=command, description=command)


async def runtime_for(project: Path, home: Path, fake_llm: FakeLLM) -> Runtime:
    return await start_runtime(
        home=home,
        cwd=project,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
        disabled_plugins=("title",),
        permission_mode="bypass",  # nobody is here to approve the writes
        sandbox="off",
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))
    root = tmp_path / "project"
    root.mkdir()
    (root / "edited.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "doomed.bin").write_bytes(bytes(range(256)))
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "secret.txt").write_bytes(b"mine\n")
    (root / "secret.txt").chmod(0o600)
    return root, home


async def test_a_turn_of_writes_edits_and_commands_is_covered(
    project: tuple[Path, Path], fake_llm: FakeLLM
) -> None:
    root, home = project
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    runtime = await runtime_for(root, home, fake_llm)
    try:
        fake_llm.add(
            Reply(tool_calls=[call("read", file_path="edited.txt")]),
            Reply(
                tool_calls=[
                    call("write", file_path="written.txt", content="new file\n"),
                    call("edit", file_path="edited.txt", old_string="two", new_string="TWO"),
                ]
            ),
            Reply(tool_calls=[bash("rm doomed.bin"), bash("echo made > new.txt")]),
            Reply(text="done"),
        )
        agent = await runtime.agents.create(root)
        agent.followup(user_text("change things"))
        await asyncio.wait_for(agent.when_idle(), 60)

        taken = [e.data for e in agent.session.events if isinstance(e.data, CheckpointTaken)]
        phases = [(c.phase, c.turn, c.step) for c in taken]
        # Step 1 read only: no snapshot; steps 2 and 3 one each, whatever their calls.
        assert phases == [("before-step", 1, 2), ("before-step", 1, 3), ("turn-end", 1, None)]
        assert all(c.error is None and c.tree for c in taken)
        first, _second, end = taken
        assert {(c.path, c.change) for c in end.changes} == {
            ("written.txt", "added"),
            ("edited.txt", "modified"),
            ("doomed.bin", "deleted"),
            ("new.txt", "added"),
        }
        assert end.changes_total == 4
        assert first.modes == {"secret.txt": 0o600}  # 0o755 is git's own; 0o600 is not

        store = await CheckpointStore.open(home, root)
        assert first.tree is not None
        assert end.tree is not None
        entries = await store.entries(first.tree)
        assert set(entries) == set(before)
        for name, data in before.items():
            assert await store.read_blob(entries[name].blob) == data
        assert entries["run.sh"].mode == 0o100755
        at_end = await store.entries(end.tree)
        assert await store.read_blob(at_end["edited.txt"].blob) == b"one\r\nTWO\r\n"
        assert await store.read_blob(at_end["new.txt"].blob) == b"made\n"
        assert "doomed.bin" not in at_end

        # /undo's plan and restore through the service: everything back, exactly.
        checkpoints = runtime.root.get(CHECKPOINTS)
        plan = await checkpoints.plan_undo(agent)
        assert plan is not None
        assert plan.turn == 1
        assert not plan.conflicts
        assert {(s.path, s.action) for s in plan.summary} == {
            ("written.txt", "remove"),
            ("new.txt", "remove"),
            ("edited.txt", "restore"),
            ("doomed.bin", "recreate"),
        }
        outcome = await checkpoints.restore(agent, plan)
        assert sorted(outcome.applied) == ["doomed.bin", "edited.txt", "new.txt", "written.txt"]
        assert {p.name: p.read_bytes() for p in root.iterdir()} == before
        assert (root / "secret.txt").stat().st_mode & 0o777 == 0o600
        assert (root / "run.sh").stat().st_mode & 0o777 == 0o755
        kinds = [type(e.data) for e in agent.session.events]
        assert kinds.index(RestoreStarted) < kinds.index(RestoreDone)
        assert await checkpoints.plan_undo(agent) is None  # nothing left to undo
    finally:
        await runtime.aclose()


async def test_what_a_subagent_changes_is_its_parents_turns_too(
    project: tuple[Path, Path], fake_llm: FakeLLM
) -> None:
    root, home = project
    runtime = await runtime_for(root, home, fake_llm)
    try:
        fake_llm.add(
            Reply(tool_calls=[call("task", description="make it", prompt="write child.txt")]),
            Reply(tool_calls=[bash("echo from the child > child.txt")]),
            Reply(text="written"),
            Reply(text="the child wrote it"),
        )
        agent = await runtime.agents.create(root)
        agent.followup(user_text("delegate"))
        await asyncio.wait_for(agent.when_idle(), 60)
        assert (root / "child.txt").read_bytes() == b"from the child\n"
        taken = [e.data for e in agent.session.events if isinstance(e.data, CheckpointTaken)]
        assert [(c.phase, c.turn) for c in taken] == [("before-step", 1), ("turn-end", 1)]
        assert [(c.path, c.change) for c in taken[-1].changes] == [("child.txt", "added")]

        checkpoints = runtime.root.get(CHECKPOINTS)
        plan = await checkpoints.plan_undo(agent)
        assert plan is not None
        await checkpoints.restore(agent, plan)
        assert not (root / "child.txt").exists()
    finally:
        await runtime.aclose()
