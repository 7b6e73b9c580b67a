"""Plan mode's read-only commands, attacked: each hostile command is refused by the
policy, and run through the real ``dsh -p --permission-mode plan`` leaves its side
effect undone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh.policy.permissions import assess
from dsh.policy.read_only_commands import only_reads
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.definition import Action, ToolDefinition
from tests.e2e.harness import Dsh, text_of
from tests.e2e.test_plan_mode import commit

READING = [
    "ls -la",
    "cat notes.txt | head -3",
    "git log --oneline -5",
    "git show HEAD --stat",
    "grep -rn old . && wc -l notes.txt",
    "rg old",
    "echo hello",
]

HOSTILE = [
    "ls > listing.txt",  # a redirection that writes
    "cat notes.txt; touch made.txt",  # a second command that writes
    "echo $(touch made.txt)",  # a substitution
    "timeout 5 touch made.txt",  # a wrapper
    "git log --output=made.txt",  # an option that writes
    "git -c core.pager='touch made.txt' log",  # options before the subcommand
    "git status",  # refreshes the index
    "git commit -m x",  # not a reading subcommand
    "rg --pre 'touch made.txt' old",  # runs a program per file
    "rg --hostname-bin=./evil old",  # runs a program for hyperlinks
    "find . -delete",  # not a reader
    "bash -c 'touch made.txt'",  # a nested script
    "ls | xargs touch",  # xargs runs what is not written
    "/tmp/ls",  # a program by path
    "l? -la",  # a pattern for a program name
    "eval touch made.txt",  # hidden
    "cat <(touch made.txt)",  # a process substitution
]


def git_init(folder: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    commit(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", READING)
def test_reading_commands_are_vouched_for(repository: Path, command: str) -> None:
    assert only_reads(command)
    # Not refused; a word naming a protected file (HEAD) is still asked, as in any mode.
    expected = "ask" if "HEAD" in command else "allow"
    assert plan_verdict(command, repository) == expected


@pytest.mark.parametrize("command", HOSTILE)
def test_hostile_commands_are_not(repository: Path, command: str) -> None:
    assert not only_reads(command)
    assert plan_verdict(command, repository) == "deny"


def bash_tool() -> ToolDefinition:
    async def run(arguments: BaseModel, context: object) -> str:
        return ""

    return ToolDefinition(name="bash", description="", arguments=BaseModel, execute=run)


def plan_verdict(command: str, cwd: Path, workdir: Path | None = None) -> str:
    action = Action(risk="exec", summary=command, command=command, workdir=workdir)
    return assess("plan", bash_tool(), action, cwd).verdict


def test_git_is_not_vouched_for_where_the_repository_names_a_program(repository: Path) -> None:
    with (repository / ".git" / "config").open("a") as config:
        config.write('[diff "evil"]\n\ttextconv = touch made.txt\n')
    (repository / ".gitattributes").write_text("* diff=evil\n")
    assert plan_verdict("git log -p", repository) == "deny"
    assert plan_verdict("ls", repository) == "allow"


def test_git_outside_the_project_is_not_vouched_for(repository: Path, tmp_path: Path) -> None:
    project = repository / "inner"
    project.mkdir()
    assert plan_verdict("git log", project, workdir=repository) == "deny"
    assert plan_verdict("git log", repository) == "allow"


def test_plan_mode_denies_with_its_reason_even_where_allow_rules_would_allow(
    repository: Path,
) -> None:
    from dsh.policy.permissions import parse_rules

    tool = bash_tool()
    action = Action(risk="exec", summary="touch", command="touch made.txt")
    allowed = parse_rules("bash(touch:*)")
    verdict = assess("plan", tool, action, repository, allow=allowed)
    assert verdict.verdict == "deny"
    assert "plan mode" in verdict.reason
    assert not verdict.grantable
    log = Action(risk="exec", summary="log", command="git log --oneline")
    assert assess("plan", tool, log, repository).verdict == "allow"
    # Typed into a running program (a pager may take "s" as "save to a file"): never.
    typed = Action(risk="exec", summary="type", command="stat made.txt", typed=True)
    assert assess("plan", tool, typed, repository).verdict == "deny"
    secret = Action(risk="exec", summary="cat", command="cat ~/.ssh/id_rsa")
    assert assess("plan", tool, secret, repository).verdict != "allow"


async def test_hostile_commands_leave_the_disk_untouched_in_plan_mode(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    git_init(dsh.project)
    (dsh.project / "notes.txt").write_text("old notes\n")
    before = sorted(p.name for p in dsh.project.iterdir())
    calls = [
        ToolCallSpec(name="bash", arguments={"command": command, "description": "try"})
        for command in HOSTILE
        if command not in ("git status", "git commit -m x")  # no commit to act on
    ]
    fake_llm.add(Reply(tool_calls=calls), Reply(text="Planned."))
    done = await dsh.run("-p", "plan it", "--permission-mode", "plan")
    assert done.code == 0, done.stderr[-3000:]
    assert sorted(p.name for p in dsh.project.iterdir()) == before
    results = [
        text_of(m) for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert len(results) == len(calls)
    for result in results:
        assert "plan mode" in result, result
