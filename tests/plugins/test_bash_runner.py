"""The bash tool with a command runner on its agent's context (an editor's terminals):
what the runner is asked, and how its outcome reads for the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dsh.services import COMMAND_RUNNER
from dsh.tools import CommandOutcome, CommandRun, CommandRunFailed, ToolError
from dsh_plugins.bash.capture import TAIL_BYTES
from tests.plugins.bash_support import Harness, eventually, loaded


@dataclass
class Recording:
    """A runner that says what it is told to, and remembers what it was asked."""

    outcome: CommandOutcome | None = None
    runs: list[CommandRun] = field(default_factory=list)

    async def run(self, run: CommandRun) -> CommandOutcome:
        self.runs.append(run)
        if self.outcome is None:
            raise CommandRunFailed("the editor is gone")
        return self.outcome


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SOME_API_KEY", "sk-hidden")


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with loaded(tmp_path) as harness:
        yield harness


def provided(harness: Harness, outcome: CommandOutcome | None) -> Recording:
    runner = Recording(outcome)
    harness.root.provide(COMMAND_RUNNER, runner)
    return runner


async def test_the_runner_is_asked_as_the_local_run_would_be(harness: Harness) -> None:
    (harness.tmp_path / "sub").mkdir()
    runner = provided(harness, CommandOutcome(output="made\n", exit_code=0, place="there"))
    text = await harness.text(
        "bash", {"command": "make", "description": "d", "workdir": "sub", "timeout_ms": 2500}
    )
    assert text == "made"
    [run] = runner.runs
    assert run.command == "make"
    assert run.cwd == harness.tmp_path / "sub"
    assert run.timeout_s == 2.5
    assert run.output_limit == TAIL_BYTES
    assert run.env["DSH_SESSION_ID"] == "session-1"
    assert run.env["PAGER"] == "cat"
    assert "SOME_API_KEY" not in run.env
    assert not (harness.tmp_path / "sub" / "made").exists()  # nothing ran here


@pytest.mark.parametrize(
    ("outcome", "ends"),
    [
        (CommandOutcome(output="", exit_code=0), "(no output)"),
        (CommandOutcome(output="x\n", exit_code=3), "x\n[exit code: 3]"),
        (CommandOutcome(output="x", signal="SIGKILL"), "x\n[killed by signal: SIGKILL]"),
        (
            CommandOutcome(output="x", signal="SIGTERM", stopped="timeout"),
            "x\n[timed out after 2000ms]\n[killed by signal: SIGTERM]",
        ),
        (
            CommandOutcome(output="tail", truncated=True, exit_code=0, place="the terminal"),
            "[output truncated; the terminal kept the last part]\ntail",
        ),
    ],
)
async def test_outcomes_read_as_a_local_run(
    harness: Harness, outcome: CommandOutcome, ends: str
) -> None:
    provided(harness, outcome)
    output = await harness.call("bash", {"command": "c", "description": "d", "timeout_ms": 2000})
    assert output.content == ends
    assert output.meta["timedOut"] == (outcome.stopped == "timeout")
    assert output.meta["signal"] == outcome.signal


async def test_a_cancel_or_a_failure_is_a_tool_error(harness: Harness) -> None:
    provided(harness, CommandOutcome(output="so far", stopped="cancel", duration_ms=12))
    with pytest.raises(ToolError) as cancelled:
        await harness.call("bash", {"command": "c", "description": "d"})
    assert cancelled.value.code == "ABORTED"
    assert "so far" in cancelled.value.message


async def test_a_runner_that_cannot_run_is_a_clear_error(harness: Harness) -> None:
    runner = provided(harness, None)
    with pytest.raises(ToolError) as failed:
        await harness.call("bash", {"command": "c", "description": "d"})
    assert failed.value.code == "BASH_RUNNER_FAILED"
    assert failed.value.message == "The command did not run: the editor is gone"
    assert len(runner.runs) == 1


async def test_background_jobs_run_here(harness: Harness) -> None:
    runner = provided(harness, CommandOutcome(output="never"))
    output = await harness.call(
        "bash", {"command": "echo job > job.txt", "description": "d", "run_in_background": True}
    )
    assert output.meta["background"] is True
    await eventually(lambda: (harness.tmp_path / "job.txt").exists())
    assert runner.runs == []
