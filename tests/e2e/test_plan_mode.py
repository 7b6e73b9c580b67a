"""Plan mode through the real ``dsh -p --permission-mode plan`` against the scripted
server: what reads runs, what writes or runs a command with effects is refused with a
reason that tells the model it is planning, and the disk is left untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, of_type, text_of

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"


def call(tool: str, **arguments: object) -> ToolCallSpec:
    return ToolCallSpec(name=tool, arguments=arguments)


def bash(command: str) -> ToolCallSpec:
    return call("bash", command=command, description="look or change")


PLAN = "# Add a greeting\n\n1. Write `hello.txt` saying hello.\n\nRisk: none."


def present(plan: str = PLAN) -> Reply:
    return Reply(tool_calls=[call("exit_plan_mode", plan=plan)])


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
