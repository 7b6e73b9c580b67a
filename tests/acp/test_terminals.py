"""Commands in the editor's terminals (``clientCapabilities.terminal``): ``dsh acp`` as
a subprocess, driven by the SDK's client side whose terminals really run the command."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ClientCapabilities, TerminalToolCallContent

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import editor_session, text
from tests.acp.terminals import TerminalEditor
from tests.e2e.harness import SETTINGS, TIMEOUT, Dsh
from tests.e2e.sandboxed import installation_outside_tmp

TERMINALS = ClientCapabilities(terminal=True)


def bash(command: str, **more: Any) -> Reply:
    arguments = {"command": command, "description": "run it", **more}
    return Reply(tool_calls=[ToolCallSpec(name="bash", arguments=json.dumps(arguments))])


def tool_results(fake_llm: FakeLLM) -> list[str]:
    messages = fake_llm.chat_requests[-1].body["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


@pytest.fixture
async def editor(dsh: Dsh) -> AsyncIterator[TerminalEditor]:
    # The editor's terminals start from the environment it gave dsh.
    editor = TerminalEditor(env=dsh.env())
    try:
        yield editor
    finally:
        await editor.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


# ---------------------------------------------------------------- what guards a command


async def test_read_only_mode_asks_and_a_rejection_never_reaches_the_terminal(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    # In read-only mode a command is asked about, with no grant to offer.
    fake_llm.add(bash("echo owned > pwned"), Reply(text="Could not."))
    editor.answers.append("reject-once")
    async with editor_session(dsh, editor, capabilities=TERMINALS) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
    [asked] = editor.asked
    assert "allow_always" not in {o.kind for o in asked.options}
    assert editor.calls == []
    assert not (dsh.project / "pwned").exists()
    assert "denied" in tool_results(fake_llm)[-1].lower()


async def test_dsh_keys_are_refused_in_bypass_mode_before_the_editor_is_asked(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    (dsh.home / "credentials.json").write_text('{"deepseek": "sk-secret"}')
    fake_llm.add(bash(f"cat {dsh.home}/credentials.json"), Reply(text="Refused."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
    assert editor.calls == []
    assert editor.asked == []
    assert "sk-secret" not in tool_results(fake_llm)[-1]


async def test_a_command_rejected_always_never_reaches_the_editor_terminal(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    fake_llm.add(
        bash("touch pwned"), Reply(text="Rejected."), bash("touch pwned"), Reply(text="Again.")
    )
    editor.answers.append("reject-always")
    async with editor_session(dsh, editor, capabilities=TERMINALS) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("again")), TIMEOUT)
        assert len(editor.asked) == 1  # the second call was refused without asking
    assert editor.calls == []
    assert not (dsh.project / "pwned").exists()


async def test_a_deny_rule_holds_in_bypass_mode_before_the_editor_is_asked(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    settings = dsh.home / "settings.toml"
    settings.write_text(
        SETTINGS + 'disabled = ["title"]\n[permissions]\ndeny = ["bash(touch:*)"]\n'
    )
    # Hidden behind a wrapper and a compound: the command analysis still finds it.
    fake_llm.add(bash("echo hi && timeout 5 touch pwned"), Reply(text="Denied."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
    assert editor.calls == []
    assert not (dsh.project / "pwned").exists()
    assert "denied" in tool_results(fake_llm)[-1].lower()


# ---------------------------------------------------------------- running in the editor


async def test_a_command_runs_in_the_editor_terminal(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    (dsh.project / "sub").mkdir()
    command = (
        'echo "out in $(basename "$PWD")"; echo "key=[$DEEPSEEK_API_KEY]"; echo oops >&2; exit 3'
    )
    fake_llm.add(bash(command, workdir="sub"), Reply(text="Ran it."))
    editor.answers.append("allow-once")
    async with editor_session(dsh, editor, capabilities=TERMINALS) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        [call] = editor.tool_calls()
        updates = editor.tool_updates(call.tool_call_id)
    assert editor.methods() == ["create", "wait_for_exit", "output", "release"]
    [(_, created)] = editor.calls[:1]
    # The sandbox's command line around bash: the editor starts it contained.
    assert Path(created["command"]).name == "bwrap"
    assert created["args"][-3:] == ["bash", "-c", command]
    assert created["cwd"] == str((dsh.project / "sub").resolve())
    assert created["outputByteLimit"] > 0
    # The local run's environment: no pager, the session named, the key withheld.
    assert created["env"]["PAGER"] == "cat"
    assert created["env"]["DSH_SESSION_ID"] == sid
    assert created["env"]["DEEPSEEK_API_KEY"] == ""
    # The editor was shown the terminal while the command ran, and after.
    shown = [
        c.terminal_id
        for u in updates
        for c in u.content or []
        if isinstance(c, TerminalToolCallContent)
    ]
    assert shown
    assert set(shown) == {"term-1"}
    assert updates[-1].status == "completed"
    # What the model read: the output, and the exit code as a local run says it.
    result = tool_results(fake_llm)[-1]
    assert "out in sub" in result
    assert "key=[]" in result
    assert "oops" in result
    assert result.endswith("[exit code: 3]")
    assert editor.terminals == {}  # released
    events = await dsh.checked_events(sid)
    [logged] = [e for e in events if e.type == "tool/result"]
    assert logged.data.meta["exitCode"] == 3
    assert logged.data.meta["ranIn"] == "the editor's terminal"
    # Loaded again, the call shows its output as text: its terminal is gone.
    again = TerminalEditor(env=dsh.env())
    async with editor_session(dsh, again, capabilities=TERMINALS) as (conn, _):
        await asyncio.wait_for(conn.load_session(cwd=str(dsh.project), session_id=sid), TIMEOUT)
    [replayed] = again.tool_calls()
    contents = [c for u in again.tool_updates(replayed.tool_call_id) for c in u.content or []]
    contents += replayed.content or []
    assert not [c for c in contents if isinstance(c, TerminalToolCallContent)]
    assert "out in sub" in "".join(c.content.text for c in contents if c.type == "content")
    assert again.calls == []


async def test_cancel_mid_command_kills_and_releases_the_terminal(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    fake_llm.add(bash("echo started; sleep 120; echo never"), Reply(text="never asked"))
    editor.answers.append("allow-once")
    async with editor_session(dsh, editor, capabilities=TERMINALS) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("run")))
        await editor.wait_for(
            lambda: any(b"started" in t.output for t in editor.terminals.values())
        )
        [pid] = editor.pids
        assert alive(pid)
        await conn.cancel(session_id=sid)
        reply = await asyncio.wait_for(prompt, TIMEOUT)
        assert reply.stop_reason == "cancelled"
        await editor.wait_for(lambda: "release" in editor.methods())
    assert not alive(pid)
    assert "kill" in editor.methods()
    assert editor.methods()[-1] == "release"
    assert editor.terminals == {}
    assert len(fake_llm.chat_requests) == 1  # nothing asked of the model after the cancel
    events = await dsh.checked_events(sid)
    [result] = [e for e in events if e.type == "tool/result"]
    assert result.data.error is not None
    assert result.data.error.code == "TOOL_CANCELLED"


async def test_a_command_past_its_timeout_is_killed(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    """The command never ends by itself, and the editor opens its terminal only once
    it has printed: its output is there before the timeout starts, however slowly a
    loaded machine starts it, so only the timeout can end it and nothing races."""
    editor.open_once_printed = b"begun"
    fake_llm.add(bash("echo begun; sleep 1000", timeout_ms=500), Reply(text="Too slow."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
    assert not alive(editor.pids[0])
    # Killed, its end seen, its output read, then released.
    assert editor.methods() == [
        "create",
        "wait_for_exit",
        "kill",
        "wait_for_exit",
        "output",
        "release",
    ]
    result = tool_results(fake_llm)[-1]
    assert result.startswith("begun")
    assert "[timed out after 500ms]" in result
    assert "[killed by signal: SIGTERM]" in result


async def test_output_beyond_the_limit_says_it_was_cut(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    fake_llm.add(bash("seq 1 40000; echo last-line"), Reply(text="Long."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
    [(_, created)] = editor.calls[:1]
    result = tool_results(fake_llm)[-1]
    assert result.startswith("[output truncated; the editor's terminal kept the last part]")
    assert "last-line" in result
    assert "\n1\n" not in result
    assert len(result.encode()) <= created["outputByteLimit"] + 200


async def test_a_refused_terminal_is_a_clear_tool_error(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    editor.refuse = "terminals are switched off"
    fake_llm.add(bash("echo hi"), Reply(text="It failed."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert editor.text() == "It failed."
        [call] = editor.tool_calls()
        assert editor.tool_updates(call.tool_call_id)[-1].status == "failed"
    assert editor.methods() == ["create"]
    result = tool_results(fake_llm)[-1]
    assert "the editor did not open a terminal" in result
    assert "terminals are switched off" in result


async def test_a_terminal_that_fails_is_a_tool_error_and_still_released(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    editor.fail_wait = "the terminal crashed"
    fake_llm.add(bash("sleep 120"), Reply(text="It failed."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
    assert editor.methods() == ["create", "wait_for_exit", "kill", "release"]
    assert not alive(editor.pids[0])
    result = tool_results(fake_llm)[-1]
    assert "the editor's terminal failed" in result
    assert "the terminal crashed" in result


async def test_an_editor_gone_mid_command_leaves_a_sound_session(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    fake_llm.add(bash("echo started; sleep 120"), Reply(text="never asked"))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, child):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("run")))
        await editor.wait_for(
            lambda: any(b"started" in t.output for t in editor.terminals.values())
        )
        assert child.stdin is not None
        child.stdin.close()  # the editor goes away; editor_session checks the clean exit
        await asyncio.wait_for(child.wait(), TIMEOUT)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(prompt, TIMEOUT)
    events = await dsh.checked_events(sid)
    [end] = [e for e in events if e.type == "turn/end"]
    assert end.data.reason.kind == "aborted"
    assert len(fake_llm.chat_requests) == 1


# ---------------------------------------------------------------- staying local


async def test_without_the_capability_commands_run_here(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    fake_llm.add(bash("echo local > here.txt"), Reply(text="Done."))
    async with editor_session(dsh, editor, "--permission-mode", "bypass") as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
    assert editor.calls == []
    assert (dsh.project / "here.txt").read_text() == "local\n"


async def test_background_jobs_stay_local(
    dsh: Dsh, fake_llm: FakeLLM, editor: TerminalEditor
) -> None:
    fake_llm.add(bash("echo job > job.txt", run_in_background=True), Reply(text="Started."))
    async with editor_session(
        dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
    ) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
        assert "started background job" in tool_results(fake_llm)[-1]
    assert editor.calls == []


async def test_a_command_in_the_editors_terminal_runs_inside_the_sandbox(
    fake_llm: FakeLLM,
) -> None:
    async with installation_outside_tmp(fake_llm) as dsh:
        bashrc = Path(dsh.environment["HOME"]) / ".bashrc"
        bashrc.write_text("# mine\n")
        fake_llm.add(bash("echo evil >> ~/.bashrc; echo made > made.txt"), Reply(text="Done."))
        editor = TerminalEditor(env=dsh.env())
        try:
            async with editor_session(
                dsh, editor, "--permission-mode", "bypass", capabilities=TERMINALS
            ) as (conn, _):
                sid = (await conn.new_session(cwd=str(dsh.project))).session_id
                await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
        finally:
            await editor.close()
        made = (dsh.project / "made.txt").read_text()
        rc = bashrc.read_text()
        [result] = [
            m["content"]
            for request in fake_llm.chat_requests
            for m in request.body["messages"]
            if m["role"] == "tool"
        ][-1:]
        created = [params for kind, params in editor.calls if kind == "create"]
    assert len(created) == 1  # it ran in the editor's terminal...
    assert Path(created[0]["command"]).name == "bwrap"  # ...inside the sandbox
    assert rc == "# mine\n"
    assert made == "made\n"
    assert "Read-only file system" in result
