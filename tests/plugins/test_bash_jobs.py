"""Background jobs: starting, reading, listing and killing them, their limits and
owners, and the notice an agent gets when a job it started ends unread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.agent import PromptAllow, PromptSubmit
from dsh.hooks import AGENT_DISPOSED, AGENT_PROMPT_SUBMIT
from dsh.llm import PluginSource, user_text
from dsh.tools import ToolError
from dsh_plugins.bash.capture import TAIL_BYTES
from dsh_plugins.bash.jobs import MAX_RUNNING, MAX_WAKES
from dsh_plugins.bash.process import group_alive
from tests.plugins.bash_support import (
    SESSION,
    FakeAgent,
    Harness,
    assert_group_gone,
    eventually,
    loaded,
    read_pid,
    subreaper,
)
from tests.support.waits import HANG_S


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with loaded(tmp_path) as harness:
        yield harness


async def start(harness: Harness, command: str, label: str = "a job", **context: object) -> str:
    text = await harness.text(
        "bash",
        {"command": command, "description": label, "run_in_background": True},
        **context,
    )
    assert text.startswith("started background job bash-")
    return text.removeprefix("started background job ")


async def output(harness: Harness, job_id: str, **arguments: object) -> str:
    return await harness.text("job_output", {"job_id": job_id, **arguments})


def notices(agent: FakeAgent) -> list[str]:
    return [message.text() for message in agent.steered]


# ------------------------------------------------------------------ lifecycle


async def test_start_read_wait_and_list(harness: Harness, tmp_path: Path) -> None:
    # The job cannot end before the test creates `go`: starting it returned at once.
    command = "echo first; until [ -e go ]; do sleep 0.02; done; echo second"
    job = await start(harness, command, "print twice")
    assert job == "bash-1"
    assert await harness.text("job_list", {}) == "bash-1 [bash] running — print twice"

    await eventually(lambda: harness.jobs.get(SESSION, job).body.stdout.total > 0)  # type: ignore[attr-defined]
    assert await output(harness, job) == "first\n[status: running]"
    assert await output(harness, job) == "(no new output)\n[status: running]"
    (tmp_path / "go").touch()
    assert await output(harness, job, wait=True) == "second\n[status: completed]"
    assert await output(harness, job) == "(no new output)\n[status: completed]"
    assert await harness.text("job_list", {}) == "bash-1 [bash] completed — print twice"
    await asyncio.sleep(0.1)
    assert harness.agent.steered == []  # its end was read: nothing to announce


async def test_failure_detail_and_stderr(harness: Harness) -> None:
    job = await start(harness, "echo out; echo err >&2; exit 3")
    assert await output(harness, job, wait=True) == (
        "out\n[stderr]\nerr\n[status: failed, exit code: 3]"
    )


async def test_wait_expiry_leaves_the_job_running(harness: Harness, tmp_path: Path) -> None:
    job = await start(harness, "until [ -e go ]; do sleep 0.02; done; echo done")
    expired = await asyncio.wait_for(output(harness, job, wait=True, timeoutMs=200), HANG_S)
    assert expired == "(no new output)\n[status: running]"
    assert harness.jobs.get(SESSION, job).running
    # A wait lasts until the job ends when that comes before its timeout.
    waiting = asyncio.ensure_future(output(harness, job, wait=True, timeoutMs=600_000))
    (tmp_path / "go").touch()
    assert await asyncio.wait_for(waiting, HANG_S) == "done\n[status: completed]"


async def test_kill_returns_at_once_and_ends_the_group(harness: Harness, tmp_path: Path) -> None:
    with subreaper():
        job = await start(harness, 'echo $$ > pid; trap "" TERM; sleep 100 & sleep 100')
        pgid = await read_pid(tmp_path / "pid")
        killed = await harness.text("job_kill", {"job_id": job, "reason": "not needed"})
        # Back before the group is gone: it ignores SIGTERM, and SIGKILL waits out the
        # grace period.
        assert group_alive(pgid)
        assert killed == f"stopping {job}\n[status: stopping]"
        assert await output(harness, job, wait=True) == (
            "(no new output)\n[status: killed, not needed]"
        )
        await assert_group_gone(pgid)
    again = await harness.text("job_kill", {"job_id": job})
    assert again == f"{job} had already ended.\n[status: killed, not needed]"
    assert harness.agent.steered == []  # the model asked for it: no notice


async def test_a_late_read_names_the_spill_file(harness: Harness) -> None:
    job = await start(harness, "head -c 200000 /dev/zero | tr '\\0' x")
    await eventually(lambda: not harness.jobs.get(SESSION, job).running)
    text = await output(harness, job)
    [spilled] = harness.spill_dir.iterdir()
    assert text == "\n".join(
        [f"[output truncated; full output: {spilled}]", "x" * TAIL_BYTES, "[status: completed]"]
    )
    assert spilled.read_text() == "x" * 200_000


# ------------------------------------------------------------------ owners and limits


async def test_jobs_belong_to_their_session(harness: Harness) -> None:
    job = await start(harness, "sleep 30")
    other = FakeAgent("session-2")
    assert await harness.text("job_list", {}, session_id="session-2", agent=other) == (
        "(no background jobs)"
    )
    with pytest.raises(ToolError) as raised:
        await harness.text("job_output", {"job_id": job}, session_id="session-2", agent=other)
    assert raised.value.code == "JOB_NOT_FOUND"
    assert await start(harness, "true", session_id="session-2", agent=other) == "bash-1"


async def test_at_most_ten_running_per_session_and_disposal_kills_them(tmp_path: Path) -> None:
    with subreaper():
        async with loaded(tmp_path) as harness:
            pids = []
            for n in range(MAX_RUNNING):
                await start(harness, f"echo $$ > pid{n}; exec sleep 100")
                pids.append(await read_pid(tmp_path / f"pid{n}"))
            with pytest.raises(ToolError) as raised:
                await start(harness, "touch eleventh")
            assert raised.value.code == "JOB_LIMIT"
            assert not (tmp_path / "eleventh").exists()
            # Another session has a limit of its own.
            await start(harness, "true", session_id="session-2", agent=FakeAgent("session-2"))
            jobs = harness.jobs
            agent = harness.agent
        # The plugin's context is gone: every job was stopped, silently.
        for pid in pids:
            await assert_group_gone(pid)
        assert {job.status for job in jobs.jobs(SESSION)} == {"killed"}
        assert agent.steered == []


async def test_a_disposed_agent_takes_its_jobs_along(harness: Harness, tmp_path: Path) -> None:
    with subreaper():
        await start(harness, "echo $$ > pid; exec sleep 100")
        pgid = await read_pid(tmp_path / "pid")
        harness.root.emit(AGENT_DISPOSED, harness.agent)
        await eventually(lambda: harness.jobs.jobs(SESSION) == [])
        await assert_group_gone(pgid)
    assert harness.agent.steered == []


# ------------------------------------------------------------------ completion notices


async def test_an_unread_end_is_announced(harness: Harness) -> None:
    job = await start(harness, "echo done; exit 2", "build the docs")
    await eventually(lambda: len(harness.agent.steered) == 1)
    [message] = harness.agent.steered
    assert message.source == PluginSource(plugin="bash", form="notice")
    text = message.text()
    assert text == (
        f"Background job {job} [bash] 'build the docs' has ended: failed (exit code: 2). "
        f'Its output has not been read yet: call job_output with job_id "{job}".'
    )
    assert await output(harness, job) == "done\n[status: failed, exit code: 2]"


async def test_a_wait_that_sees_the_end_reports_it(harness: Harness) -> None:
    job = await start(harness, "sleep 0.3")
    assert await output(harness, job, wait=True) == "(no new output)\n[status: completed]"
    await asyncio.sleep(0.2)
    assert harness.agent.steered == []


async def test_wake_ups_stop_after_three_until_the_user_speaks(harness: Harness) -> None:
    agent = harness.agent  # idle: every notice would start a turn
    for n in range(MAX_WAKES + 1):
        await start(harness, "true", f"job {n}")
        await eventually(lambda n=n: len(agent.steered) + len(agent.injected) == n + 1)
    assert len(agent.steered) == MAX_WAKES
    [held] = agent.injected  # still told, at the next turn, without waking it
    assert "bash-4" in held.text()

    # A prompt from the user (not a notice) allows wake-ups again.
    await harness.root.waterfall(
        AGENT_PROMPT_SUBMIT, PromptSubmit(agent, agent.steered[0]), default=lambda s: PromptAllow()
    )
    await start(harness, "true")
    await eventually(lambda: len(agent.injected) == 2)
    await harness.root.waterfall(
        AGENT_PROMPT_SUBMIT, PromptSubmit(agent, user_text("next")), default=lambda s: PromptAllow()
    )
    await start(harness, "true")
    await eventually(lambda: len(agent.steered) == MAX_WAKES + 1)


async def test_a_busy_agent_takes_notices_into_its_turn(harness: Harness) -> None:
    busy = FakeAgent(busy=True)
    for _ in range(MAX_WAKES + 2):
        await start(harness, "true", agent=busy)
    # Joining a running turn wakes nobody, so the cap does not apply.
    await eventually(lambda: len(busy.steered) == MAX_WAKES + 2)
    assert busy.injected == []
