"""Plan mode through the real ``dsh -p --permission-mode plan`` against the scripted
server: what reads runs, what writes or runs a command with effects is refused with a
reason that tells the model it is planning, and the disk is left untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, close_stdin, finish, of_type, send, stream_events, text_of

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"


def call(tool: str, **arguments: object) -> ToolCallSpec:
    return ToolCallSpec(name=tool, arguments=arguments)


def bash(command: str) -> ToolCallSpec:
    return call("bash", command=command, description="look or change")


PLAN = "# Add a greeting\n\n1. Write `hello.txt` saying hello.\n\nRisk: none."


def present(plan: str = PLAN) -> Reply:
    return Reply(tool_calls=[call("exit_plan_mode", plan=plan)])


def tool_results(server: FakeLLM, request: int = -1) -> list[str]:
    body = server.chat_requests[request].body
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


async def drive(
    dsh: Dsh, answer: dict[str, Any], *, approve: str = "allow_once"
) -> tuple[list[dict[str, Any]], Any]:
    """``dsh -p`` in plan mode driven over stream-json: the prompt, then ``answer`` to
    the plan request (and ``approve`` to any approval request) until the turn ends.
    Every line printed, and how the run finished."""
    child = await dsh.start(
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "plan",
    )
    await send(child, {"type": "prompt", "text": "plan a greeting, then write it"})
    lines: list[dict[str, Any]] = []
    async for line in stream_events(child):
        lines.append(line)
        if line.get("type") == "plan-request":
            await send(child, {"type": "plan", "requestId": line["requestId"], **answer})
        elif line.get("type") == "approval-request":
            await send(
                child, {"type": "approval", "requestId": line["requestId"], "outcome": approve}
            )
        elif line.get("type") == "turn/end":
            break
    await close_stdin(child)
    done = await finish(child, None)
    lines += done.json_lines()
    return lines, done


def commit(project: Path) -> None:
    """A repository with one commit and ``notes.txt``."""
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "notes.txt").write_text("old notes\n")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first commit"],
        cwd=project,
        check=True,
    )


async def test_plan_mode_refuses_every_effect_and_runs_what_only_reads(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    project = dsh.project
    commit(project)
    before = {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()}
    (dsh.home / "settings.toml").write_text(
        f"[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(FIXTURE))}, "stdio"]\n'
    )
    fake_llm.add(
        Reply(
            tool_calls=[
                call("read", file_path="notes.txt"),
                bash("git log --oneline"),
            ]
        ),
        Reply(
            tool_calls=[
                call("write", file_path="new.txt", content="made\n"),
                call("edit", file_path="notes.txt", old_string="old", new_string="new"),
                bash("touch touched.txt"),
                call("terminal_open", command="touch from-terminal.txt", name="t"),
                call("mcp__fixture__wipe", target="everything"),
                call("mcp__fixture__echo", text="hello"),
            ]
        ),
        Reply(text="Here is my plan."),
    )
    done = await dsh.run("-p", "plan the change", "--permission-mode", "plan")
    assert done.code == 0, done.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()} == before

    results = [
        text_of(m) for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    read, log, write, edit, touch, terminal, wipe, echo = results
    assert "old notes" in read
    assert "first commit" in log
    for refused in (write, edit, touch, terminal, wipe):
        assert "plan mode" in refused, refused
        assert "present your plan" in refused, refused
    assert echo == "echo: hello"
    # The system prompt says it is planning.
    system = fake_llm.chat_requests[0].body["messages"][0]
    assert system["role"] == "system"
    assert "plan mode" in text_of(system).lower()
    events = await dsh.checked_events()
    assert len(of_type(events, "tool/result")) == 8


async def test_an_untrusted_project_cannot_choose_where_plans_are_saved(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """A hostile repository's settings point the plans' folder at ~/.ssh: nothing is
    written there; the same key in the user's own settings is honoured."""
    home = dsh.home_of_its_own()
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700)
    (dsh.project / ".dsh").mkdir()
    hostile = dsh.project / ".dsh" / "settings.toml"
    hostile.write_text('[plugins.plan]\ndirectory = "~/.ssh"\n')
    hostile.chmod(0o644)
    fake_llm.add(present(), Reply(reasoning="The plan is presented; I stop here."))
    done = await dsh.run("-p", "plan a greeting", "--permission-mode", "plan")
    assert done.code == 0, done.stderr
    assert list(ssh.iterdir()) == []
    assert "ignored plugins.plan.directory" in done.stderr
    assert "saved" not in text_of(
        next(m for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool")
    )

    # The user's own setting (relative to their home with ~) is where plans go.
    settings = dsh.home / "settings.toml"
    settings.write_text(settings.read_text() + '\n[plugins.plan]\ndirectory = "~/plans"\n')
    fake_llm.add(present(), Reply(reasoning="The plan is presented; I stop here."))
    done = await dsh.run("-p", "plan a greeting", "--permission-mode", "plan")
    assert done.code == 0, done.stderr
    assert list(ssh.iterdir()) == []
    [saved] = (home / "plans").iterdir()
    assert saved.read_text() == PLAN + "\n"
    assert saved.name.endswith("-add-a-greeting.md")
    said = next(m for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool")
    assert f"The plan was saved to {saved}" in text_of(said)


async def test_approved_in_accept_edits_the_next_write_runs_unasked_in_the_same_turn(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        present(),
        Reply(tool_calls=[call("write", file_path="hello.txt", content="hello\n")]),
        Reply(text="Written."),
    )
    lines, done = await drive(dsh, {"outcome": "accept-edits"})
    assert done.code == 0, done.stderr
    [request] = [line for line in lines if line["type"] == "plan-request"]
    events = await dsh.checked_events()
    [plan_call, write_call] = of_type(events, "tool/call")
    assert (request["plan"], request["callId"], request["sessionId"]) == (
        PLAN,
        plan_call.data.call_id,
        (await dsh.session_ids())[0],
    )
    assert "agentLabel" not in request
    assert not [line for line in lines if line["type"] == "approval-request"]
    assert (dsh.project / "hello.txt").read_text() == "hello\n"
    assert tool_results(fake_llm, 1) == [
        "The user approved your plan. Permission mode is now accept-edits: carry it out now, "
        "step by step."
    ]
    assert "Created file" in tool_results(fake_llm)[-1]
    # One turn: the plan, its approval and the write.
    [start] = of_type(events, "turn/start")
    [end] = of_type(events, "turn/end")
    [reviewed] = of_type(events, "plan/reviewed")
    assert start.seq < plan_call.seq < reviewed.seq < write_call.seq < end.seq
    assert (reviewed.data.outcome, reviewed.data.by, reviewed.data.mode) == (
        "accept-edits",
        "user",
        "accept-edits",
    )
    [result] = [line for line in lines if line["type"] == "result"]
    assert (result["result"], result["plan"]) == ("Written.", PLAN)


async def test_keep_planning_sends_the_note_back_and_writes_nothing(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        present(),
        Reply(tool_calls=[call("write", file_path="hello.txt", content="hello\n")]),
        Reply(text="I will plan again."),
    )
    lines, done = await drive(dsh, {"outcome": "keep-planning", "note": "greet in French"})
    assert done.code == 0, done.stderr
    # The next request the model got holds the note, in the plan tool's result.
    assert tool_results(fake_llm, 1) == [
        "The user wants you to keep planning. Their note: greet in French. Stay in plan mode: "
        "revise the plan and present it again with exit_plan_mode."
    ]
    refused = tool_results(fake_llm)[-1]
    assert "plan mode" in refused
    assert not (dsh.project / "hello.txt").exists()
    assert not [line for line in lines if line["type"] == "approval-request"]
    events = await dsh.checked_events()
    [reviewed] = of_type(events, "plan/reviewed")
    assert (reviewed.data.outcome, reviewed.data.note, reviewed.data.mode) == (
        "keep-planning",
        "greet in French",
        None,
    )


async def test_approved_as_usual_the_next_write_is_asked(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        present(),
        Reply(tool_calls=[call("write", file_path="hello.txt", content="hello\n")]),
        Reply(text="Written."),
    )
    lines, done = await drive(dsh, {"outcome": "default"})
    assert done.code == 0, done.stderr
    [asked] = [line for line in lines if line["type"] == "approval-request"]
    assert asked["toolName"] == "write"
    assert (dsh.project / "hello.txt").read_text() == "hello\n"
    events = await dsh.checked_events()
    [reviewed] = of_type(events, "plan/reviewed")
    assert (reviewed.data.outcome, reviewed.data.mode) == ("default", "default")


async def test_a_bad_plan_answer_is_said_and_a_good_one_still_taken(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(present(), Reply(text="Planned."))
    child = await dsh.start(
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "plan",
    )
    await send(child, {"type": "prompt", "text": "plan it"})
    async for line in stream_events(child):
        if line.get("type") == "plan-request":
            await send(
                child,
                {"type": "plan", "requestId": line["requestId"], "outcome": "bypass"},
                {"type": "plan", "requestId": "no-such-request", "outcome": "default"},
                {"type": "plan", "requestId": line["requestId"], "outcome": "keep-planning"},
            )
        elif line.get("type") == "turn/end":
            break
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    assert (
        "stdin line 2: bad plan answer: the outcome is one of accept-edits, default, keep-planning"
        in done.stderr
    )
    assert "stdin line 3: no pending plan with that id" in done.stderr
    [reviewed] = of_type(await dsh.checked_events(), "plan/reviewed")
    assert reviewed.data.outcome == "keep-planning"


async def test_with_stdin_closed_a_plan_is_unreviewed_and_dsh_ends(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    # The plan comes after the driver closed stdin: nobody is left to review it.
    fake_llm.add(
        Reply(tool_calls=[call("read", file_path="notes.txt")], chunk_delay_ms=200),
        present(),
        Reply(reasoning="Nobody reviews it; I stop."),
    )
    (dsh.project / "notes.txt").write_text("notes\n")
    child = await dsh.start(
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "json",
        "--permission-mode",
        "plan",
    )
    await send(child, {"type": "prompt", "text": "plan it"})
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    [result] = done.json_lines()
    assert (result["result"], result["plan"]) == (PLAN, PLAN)
    events = await dsh.checked_events()
    [reviewed] = of_type(events, "plan/reviewed")
    assert reviewed.data.outcome == "unavailable"
    assert tool_results(fake_llm)[-1].startswith("Nobody can approve plans here")


async def test_plain_headless_the_plan_is_the_result(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(present(), Reply(reasoning="Nobody reviews it here; I stop."))
    done = await dsh.run("-p", "plan a greeting", "--permission-mode", "plan")
    assert done.code == 0, done.stderr
    assert done.stdout == PLAN + "\n"
    [reviewed] = of_type(await dsh.checked_events(), "plan/reviewed")
    assert (reviewed.data.outcome, reviewed.data.by) == ("unavailable", "headless")

    # A model ending its turn says a line: the plan is still the result, printed last.
    fake_llm.add(present(), Reply(text="The plan is above."))
    done = await dsh.run("-p", "plan a greeting", "--permission-mode", "plan")
    assert done.code == 0, done.stderr
    assert done.stdout.endswith(PLAN + "\n")

    # As JSON: the result and the plan.
    fake_llm.add(present(), Reply(text="The plan is above."))
    done = await dsh.run(
        "-p", "plan a greeting", "--permission-mode", "plan", "--output-format", "json"
    )
    assert done.code == 0, done.stderr
    [result] = done.json_lines()
    assert (result["result"], result["plan"], result["isError"]) == (PLAN, PLAN, False)


async def test_slash_plan_as_the_prompt_plans_headless(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[call("write", file_path="hello.txt", content="hello\n")]),
        present(),
        Reply(reasoning="Planned; nobody to review."),
    )
    done = await dsh.run("-p", "/plan add a greeting", "--output-format", "json")
    assert done.code == 0, done.stderr
    assert not (dsh.project / "hello.txt").exists()
    assert "plan mode" in tool_results(fake_llm, 1)[0]
    assert user_texts_of(fake_llm)[-1] == "add a greeting"
    # stdout is the JSON record alone; what /plan says for a person is on stderr.
    [result] = done.json_lines()
    assert result["result"] == PLAN
    assert "Plan mode: the model reads and proposes a plan" in done.stderr


def user_texts_of(server: FakeLLM) -> list[str]:
    return [text_of(m) for m in server.chat_requests[0].body["messages"] if m["role"] == "user"]


async def test_a_subagent_works_in_plan_mode_too(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """The parent in plan mode delegates (allowed: only a delegation); each of the
    child's calls is judged in plan mode: its write is refused, the file absent."""
    task = {"description": "write the greeting", "prompt": "MARK-C: write hello.txt"}
    fake_llm.add(
        Reply(tool_calls=[call("task", **task)]),
        Reply(tool_calls=[call("write", file_path="hello.txt", content="hello\n")], when="MARK-C"),
        Reply(text="I could not write it: plan mode.", when="MARK-C"),
        Reply(text="The child could not write."),
    )
    done = await dsh.run("-p", "delegate it", "--permission-mode", "plan")
    assert done.code == 0, done.stderr
    assert not (dsh.project / "hello.txt").exists()
    child_refusal = next(
        text_of(m) for m in fake_llm.chat_requests[2].body["messages"] if m["role"] == "tool"
    )
    assert "plan mode" in child_refusal
    assert "present your plan" in child_refusal
    parent = tool_results(fake_llm)[-1]
    assert "I could not write it: plan mode." in parent
    assert not parent.startswith("Error")  # the delegation itself ran


async def test_a_session_resumed_in_plan_mode_replays_in_each_turns_mode(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """The first turn in the settings' mode, the second resumed with ``--permission-mode
    plan``: each ``turn/start`` says its mode, so the replay plans where the session did
    (the system prompt's plan section in the second turn's request only)."""
    fake_llm.add(Reply(text="Hello."), Reply(text="Planning."))
    first = await dsh.run("-p", "hello", "--output-format", "json")
    assert first.code == 0, first.stderr
    [session_id] = await dsh.session_ids()
    again = await dsh.run("-p", "now plan", "--resume", session_id, "--permission-mode", "plan")
    assert again.code == 0, again.stderr

    events = await dsh.checked_events(session_id)
    assert [e.data.mode for e in of_type(events, "turn/start")] == ["default", "plan"]
    prompts = [r.body["messages"][0]["content"] for r in fake_llm.chat_requests]
    assert ["You are in plan mode" in str(p) for p in prompts] == [False, True]
