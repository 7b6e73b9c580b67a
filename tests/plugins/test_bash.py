"""The bash tool against real processes: output and markers, environment, timeouts,
cancellation of whole process groups, and very large or undecodable output."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh.kernel import Context
from dsh.llm import CallId, ToolCallBlock
from dsh.services import TOOLS
from dsh.tools import Action, ToolError
from dsh_plugins.bash.capture import SPILL_CAP_BYTES, TAIL_BYTES
from dsh_plugins.bash.jobs import JobService
from dsh_plugins.bash.process import GRACE_S, KILL_WAIT_S, ShellProcess
from dsh_plugins.bash.tool import BashArguments, bash_tool, supervise
from tests.plugins.bash_support import (
    Harness,
    assert_group_gone,
    eventually,
    loaded,
    process_running,
    read_pid,
    subreaper,
)
from tests.support.waits import HANG_S

# bash ignores SIGTERM, and so do the two sleeps it leaves behind: only SIGKILL ends
# the group. The pid file tells the test which group to look for.
STUBBORN = 'echo $$ > pid; trap "" TERM; sleep 100 & sleep 100'


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with loaded(tmp_path) as harness:
        yield harness


async def bash(harness: Harness, command: str, **arguments: object) -> str:
    return await harness.text("bash", {"command": command, "description": "test", **arguments})


# ------------------------------------------------------------------ output and markers


async def test_stdout_alone_without_markers(harness: Harness) -> None:
    output = await harness.call("bash", {"command": "echo hello", "description": "greet"})
    assert output.content == "hello"
    assert not output.is_error
    assert not output.spilled
    assert output.meta["exitCode"] == 0


async def test_stderr_follows_its_marker(harness: Harness) -> None:
    assert await bash(harness, "echo out; echo err >&2") == "out\n[stderr]\nerr"
    assert await bash(harness, "echo only-err >&2") == "[stderr]\nonly-err"


async def test_no_output(harness: Harness) -> None:
    assert await bash(harness, "true") == "(no output)"


async def test_a_failing_exit_is_a_result_not_an_error(harness: Harness) -> None:
    output = await harness.call("bash", {"command": "echo x; exit 3", "description": "fail"})
    assert output.content == "x\n[exit code: 3]"
    assert not output.is_error
    assert await bash(harness, "exit 1") == "(no output)\n[exit code: 1]"


async def test_death_by_signal(harness: Harness) -> None:
    assert await bash(harness, "kill -KILL $$") == "(no output)\n[killed by signal: SIGKILL]"


async def test_non_utf8_output_is_decoded_with_replacement(harness: Harness) -> None:
    assert await bash(harness, r"printf 'ok \xff\xfe end\n'") == "ok \ufffd\ufffd end"


async def test_each_call_is_a_fresh_shell(harness: Harness) -> None:
    await bash(harness, "cd /; export SEEN=1")
    assert await bash(harness, 'pwd; echo "${SEEN:-unset}"') == f"{harness.tmp_path}\nunset"


async def test_stdin_is_empty(harness: Harness) -> None:
    assert await bash(harness, "cat; echo done") == "done"


# ------------------------------------------------------------------ workdir


async def test_workdir_relative_absolute_and_missing(harness: Harness, tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    assert await bash(harness, "pwd") == str(tmp_path)
    assert await bash(harness, "pwd", workdir="sub/deeper") == str(tmp_path / "sub" / "deeper")
    assert await bash(harness, "pwd", workdir=str(tmp_path / "sub")) == str(tmp_path / "sub")
    with pytest.raises(ToolError) as raised:
        await bash(harness, "pwd", workdir="nowhere")
    assert raised.value.code == "BASH_BAD_WORKDIR"


# ------------------------------------------------------------------ environment


async def test_environment_is_scrubbed_and_marked(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "t0ken")
    monkeypatch.setenv("db_password", "pw")
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    monkeypatch.setenv("DSH_DEBUG", "1")
    monkeypatch.setenv("PLAIN_SETTING", "kept")
    lines = set((await bash(harness, "env")).splitlines())
    names = {line.partition("=")[0] for line in lines}
    assert not names & {"MY_API_TOKEN", "db_password", "OPENAI_API_KEY", "DSH_DEBUG"}
    assert f"PATH={os.environ['PATH']}" in lines
    assert "PLAIN_SETTING=kept" in lines
    for fixed in ("NO_COLOR=1", "TERM=dumb", "PAGER=cat", "GIT_PAGER=cat", "DSH_SHELL=1"):
        assert fixed in lines
    assert "DSH_SESSION_ID=session-1" in lines
    assert f"DSH_HOME={harness.tmp_path / 'home'}" in lines


async def test_env_passthrough_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_TOKEN", "gh-secret")
    monkeypatch.setenv("OTHER_TOKEN", "other")
    async with loaded(tmp_path, {"env_passthrough": ["GH_TOKEN"]}) as harness:
        assert await bash(harness, 'echo "$GH_TOKEN/${OTHER_TOKEN:-gone}"') == "gh-secret/gone"


async def test_spawn_failure_is_an_error(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolError) as raised:
        await bash(harness, "echo never")
    assert raised.value.code == "BASH_SPAWN_FAILED"


# ------------------------------------------------------------------ arguments


def test_arguments_schema_and_aliases() -> None:
    tool = bash_tool(JobService(Context()))
    schema = tool.schema.parameters
    assert schema["required"] == ["command", "description"]
    assert schema["properties"]["timeout_ms"] == {
        "type": "integer",
        "description": schema["properties"]["timeout_ms"]["description"],
    }
    assert tool.kind == "execute"
    assert not tool.read_only
    camel = BashArguments.model_validate({"command": "x", "description": "d", "timeoutMs": 5})
    snake = BashArguments.model_validate({"command": "x", "description": "d", "timeout_ms": 5})
    assert camel.timeout_ms == snake.timeout_ms == 5
    with pytest.raises(ValueError, match="at least 1"):
        BashArguments.model_validate({"command": "x", "description": "d", "timeout_ms": 0})
    with pytest.raises(ValueError, match="empty"):
        BashArguments.model_validate({"command": "  ", "description": "d"})


async def test_describe_names_the_command(harness: Harness) -> None:
    tool = harness.root.get(TOOLS).get("bash")
    arguments = BashArguments(command="make test\nmake lint", description="check")
    action = await tool.action(arguments, harness.context())
    assert action == Action(
        risk="exec",
        summary="make test",
        details="make test\nmake lint",
        command="make test\nmake lint",
        sandboxed=True,
    )


# ------------------------------------------------------------------ timeouts and cancels


def budget_spent_at(monkeypatch: pytest.MonkeyPatch, ready: Path) -> list[float]:
    """The command's time budget runs out once ``ready`` exists (the command has got as
    far as the test needs), not after a guess at how long a loaded machine takes to get
    there; the budgets asked for are returned."""
    asked: list[float] = []

    async def spent(seconds: float) -> None:
        asked.append(seconds)
        await eventually(ready.exists)

    monkeypatch.setattr("dsh_plugins.bash.tool.budget_spent", spent)
    return asked


async def test_timeout_marker_within_the_budget(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command would sleep for ten minutes: the markers say the timeout ended it.
    asked = budget_spent_at(monkeypatch, tmp_path / "ready")
    command = "echo before; touch ready; sleep 600"
    output = await asyncio.wait_for(bash(harness, command, timeout_ms=300), HANG_S)
    assert output == "before\n[timed out after 300ms]\n[killed by signal: SIGTERM]"
    assert asked == [0.3]


async def test_timeout_kills_a_group_that_ignores_sigterm(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bash notes the SIGTERM and waits on; its sleep ignores it. The note proves the
    # group got SIGTERM first and the grace period to act on it before the SIGKILL.
    # The budget runs out once both traps are set (the subshell's is set last).
    asked = budget_spent_at(monkeypatch, tmp_path / "ready")
    command = (
        'echo $$ > pid; trap "echo TERM >> termed" TERM; '
        '(trap "" TERM; touch ready; exec sleep 100) & wait; wait'
    )
    with subreaper():
        output = await asyncio.wait_for(
            harness.call("bash", {"command": command, "description": "stubborn", "timeoutMs": 300}),
            HANG_S,
        )
        pgid = int((tmp_path / "pid").read_text())
        assert output.content == "(no output)\n[timed out after 300ms]\n[killed by signal: SIGKILL]"
        assert not output.is_error
        assert output.meta["timedOut"] is True
        assert (tmp_path / "termed").read_text() == "TERM\n"
        assert asked == [0.3]
        await assert_group_gone(pgid)


async def test_cancel_signal_kills_the_whole_group(harness: Harness, tmp_path: Path) -> None:
    with subreaper():
        signal = asyncio.Event()
        call = asyncio.ensure_future(
            harness.call(
                "bash",
                {"command": STUBBORN, "description": "stubborn"},
                harness.context(signal=signal),
            )
        )
        pgid = await read_pid(tmp_path / "pid")
        signal.set()
        with pytest.raises(ToolError) as raised:
            await asyncio.wait_for(call, GRACE_S + 3)
        assert raised.value.code == "ABORTED"
        assert "cancelled after" in raised.value.message
        await assert_group_gone(pgid)


async def test_cancelling_the_task_kills_the_whole_group(harness: Harness, tmp_path: Path) -> None:
    with subreaper():
        call = asyncio.ensure_future(
            harness.call("bash", {"command": STUBBORN, "description": "stubborn"})
        )
        pgid = await read_pid(tmp_path / "pid")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await assert_group_gone(pgid)


async def test_a_cancel_before_the_start_runs_nothing(harness: Harness, tmp_path: Path) -> None:
    signal = asyncio.Event()
    signal.set()
    with pytest.raises(ToolError) as raised:
        await harness.call(
            "bash",
            {"command": "touch ran", "description": "x"},
            harness.context(signal=signal),
        )
    assert raised.value.code == "ABORTED"
    assert not (tmp_path / "ran").exists()


async def test_a_grandchild_holding_the_pipes_is_not_waited_for(harness: Harness) -> None:
    output = await asyncio.wait_for(bash(harness, "sleep 600 & echo $!"), HANG_S)
    grandchild = int(output.splitlines()[0])
    try:
        # The call came back while the sleep still holds the pipes open.
        assert process_running(grandchild)
    finally:
        os.kill(grandchild, 9)


# ------------------------------------------------------------------ large output


async def test_100_mb_of_output_stays_bounded_and_spills(harness: Harness) -> None:
    tracemalloc.start()
    try:
        output = await harness.call(
            "bash",
            {"command": "head -c 100000000 /dev/zero | tr '\\0' 'a'", "description": "flood"},
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"peak Python allocation {peak} bytes"
    assert output.spilled
    content = output.content
    assert isinstance(content, str)
    truncated, capped, *kept = content.split("\n")  # what says it was cut, first
    assert kept == ["a" * TAIL_BYTES]
    path = Path(output.meta["spill"]["stdout"])
    assert truncated == f"[output truncated; full output: {path}]"
    # The spill file stops at its cap (64 MiB) and says how much it is missing.
    assert capped == (
        "[the full output file stops at 64 MiB; "
        f"the last {100_000_000 - SPILL_CAP_BYTES} bytes were not saved]"
    )
    assert path.parent == harness.spill_dir
    assert path.stat().st_size == SPILL_CAP_BYTES
    assert set(path.read_bytes()[-1000:]) == {ord("a")}


async def test_output_over_the_tail_spills_whole(harness: Harness) -> None:
    command = "head -c 150000 /dev/zero | tr '\\0' 'o'; head -c 70000 /dev/zero | tr '\\0' 'e' >&2"
    output = await harness.call("bash", {"command": command, "description": "two floods"})
    out_path = Path(output.meta["spill"]["stdout"])
    err_path = Path(output.meta["spill"]["stderr"])
    assert output.content == "\n".join(
        [
            f"[output truncated; full output: {out_path}]",
            "o" * TAIL_BYTES,
            "[stderr]",
            f"[output truncated; full output: {err_path}]",
            "e" * TAIL_BYTES,
        ]
    )
    assert out_path.read_text() == "o" * 150_000
    assert err_path.read_text() == "e" * 70_000


async def test_small_output_writes_no_file(harness: Harness) -> None:
    output = await harness.call(
        "bash", {"command": f"head -c {TAIL_BYTES} /dev/zero", "description": "exactly the tail"}
    )
    assert not output.spilled
    assert list(harness.spill_dir.iterdir()) == []


async def test_without_a_spill_store_files_go_under_dsh_home(
    harness: Harness, tmp_path: Path
) -> None:
    output = await harness.call(
        "bash",
        {"command": "head -c 100000 /dev/zero | tr '\\0' z", "description": "flood"},
        harness.context(spill=False),
    )
    path = Path(output.meta["spill"]["stdout"])
    assert path.is_relative_to(tmp_path / "home" / "spill")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == "z" * 100_000


async def test_a_cut_character_at_the_tail_start_is_dropped(harness: Harness) -> None:
    # 3-byte characters: the tail boundary falls inside one of them.
    output = await bash(harness, "for i in $(seq 30000); do printf '\\u20ac'; done")
    assert set(output.splitlines()[1]) == {"€"}  # after the line that says it was cut


async def test_a_cut_line_at_the_tail_start_is_dropped(harness: Harness) -> None:
    output = await bash(harness, "seq 1 100000")
    note, first, *rest = output.splitlines()
    assert note.startswith("[output truncated; full output: ")
    # A whole number, where the cut fell (not its last digits), then the rest in order.
    assert int(rest[-1]) == 100000
    assert int(first) == 100000 - len(rest)


async def test_a_cancel_through_the_tool_pipeline(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline cancels the running call as the signal fires; the group still goes,
    and the grace period is not restarted by the second stop request: a wait for the
    group after the first is for what is left of the first grace period."""
    waits: list[float] = []
    gone_within = ShellProcess._gone_within

    async def watched(self: ShellProcess, seconds: float) -> bool:
        waits.append(seconds)
        return await gone_within(self, seconds)

    monkeypatch.setattr(ShellProcess, "_gone_within", watched)
    # The command runs (its pid file may come before the tool has its pipes): a
    # cancel that lands while it is started kills it at once, with no grace.
    supervising = asyncio.Event()

    async def supervised(*arguments: Any) -> Any:
        supervising.set()
        return await supervise(*arguments)

    monkeypatch.setattr("dsh_plugins.bash.tool.supervise", supervised)
    with subreaper():
        signal = asyncio.Event()
        call = ToolCallBlock(
            id=CallId("call-pipeline"),
            name="bash",
            arguments=json.dumps({"command": STUBBORN, "description": "stubborn"}),
        )
        running = asyncio.ensure_future(
            harness.root.get(TOOLS).run(call, harness.context(signal=signal), None)
        )
        pgid = await read_pid(tmp_path / "pid")
        await asyncio.wait_for(supervising.wait(), HANG_S)
        signal.set()
        outcome = await asyncio.wait_for(running, HANG_S)
        assert outcome.error_code == "TOOL_CANCELLED"
        await assert_group_gone(pgid)
    # The group ignores SIGTERM: the grace period, then SIGKILL and its short wait.
    first, *later, after_kill = waits
    assert first == pytest.approx(GRACE_S)
    assert all(left < GRACE_S - 1e-6 for left in later), waits
    assert after_kill == KILL_WAIT_S
