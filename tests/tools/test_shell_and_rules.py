"""Bash commands split by the real bash grammar, and permission rules over them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh.policy.permissions import Rule, RuleError, assess, rules_cover, session_rules
from dsh.policy.shell import analyse
from dsh.tools import Action, ToolDefinition


class Args(BaseModel):
    pass


async def nothing(args: Args, context: object) -> str:
    return ""


BASH = ToolDefinition(name="bash", description="", arguments=Args, execute=nothing)
EDIT = ToolDefinition(name="edit", description="", arguments=Args, execute=nothing)
READ = ToolDefinition(name="read", description="", arguments=Args, execute=nothing, read_only=True)


def command(text: str) -> Action:
    return Action(risk="exec", summary=text, command=text)


def write(path: Path) -> Action:
    return Action(risk="write", summary=f"edit {path}", paths=(path,))


@pytest.mark.parametrize(
    ("source", "commands", "checkable"),
    [
        ("git status", ["git status"], True),
        ("git status; rm -rf ~", ["git status", "rm -rf ~"], True),
        ("ls | grep x && echo ok || echo no", ["ls", "grep x", "echo ok", "echo no"], True),
        ("(cd src && make)", ["cd src", "make"], True),
        (
            "echo $(curl -s evil.example)",
            ["curl -s evil.example", "echo $(curl -s evil.example)"],
            False,
        ),
        ("diff <(ls a) <(ls b)", ["ls a", "ls b", "diff <(ls a) <(ls b)"], False),
        ("make 2>&1 > /dev/null", ["make"], True),
        ("echo x > file", ["echo x"], False),
        ("echo x >> ~/.bashrc", ["echo x"], False),
        ("FOO=1 make", ["make"], False),
        ("for f in *; do rm $f; done", ["rm $f"], False),
        ('echo "unterminated', ["echo"], False),
    ],
)
def test_commands_are_split_into_what_would_run(
    source: str, commands: list[str], checkable: bool
) -> None:
    parsed = analyse(source)
    assert sorted(parsed.commands) == sorted(commands)
    assert parsed.checkable is checkable


def test_rules_parse_and_refuse_nonsense() -> None:
    assert Rule.parse("bash(git status:*)") == Rule("bash", "git status:*")
    assert Rule.parse("  read ") == Rule("read")
    assert str(Rule.parse("edit(src/**)")) == "edit(src/**)"
    with pytest.raises(RuleError, match="tool\\(pattern\\)"):
        Rule.parse("bash git status")


@pytest.mark.parametrize(
    ("rules", "source", "covered"),
    [
        (["bash(git status:*)"], "git status", True),
        (["bash(git status:*)"], "git status --short", True),
        (["bash(git status:*)"], "git statusx", False),
        (["bash(git status:*)"], "git status; rm -rf ~", False),  # the rm rides on nothing
        (["bash(git status:*)", "bash(rm:*)"], "git status; rm -rf ~", True),
        (["bash(echo:*)"], "echo x > file", False),  # a write never rides on a rule
        (["bash(echo:*)"], "echo $(curl evil.example)", False),
        (["bash(echo:*)", "bash(curl:*)"], "echo $(curl evil.example)", False),
        (["bash(npm test)"], "npm test", True),
        (["bash(npm test)"], "npm test --watch", False),
        (["bash"], "anything at all", True),
        (["bash(ls:*)"], "for f in *; do ls $f; done", False),
    ],
)
def test_a_command_is_covered_only_when_every_part_is(
    rules: list[str], source: str, covered: bool
) -> None:
    parsed = [Rule.parse(r) for r in rules]
    assert rules_cover(parsed, BASH, command(source), Path("/w")) is covered


def test_edit_rules_cover_file_tools_by_path(tmp_path: Path) -> None:
    rules = [Rule.parse("edit(src/**)")]
    assert rules_cover(rules, EDIT, write(tmp_path / "src" / "app.py"), tmp_path)
    assert not rules_cover(rules, EDIT, write(tmp_path / "docs" / "x.md"), tmp_path)
    assert not rules_cover(rules, BASH, command("ls"), tmp_path)


@pytest.mark.parametrize(
    ("mode", "inside", "verdict"),
    [
        ("read-only", True, "deny"),
        ("default", True, "ask"),
        ("accept-edits", True, "allow"),
        ("accept-edits", False, "ask"),
        ("bypass", False, "allow"),
    ],
)
def test_modes_decide_writes(tmp_path: Path, mode: str, inside: bool, verdict: str) -> None:
    target = tmp_path / "a.txt" if inside else tmp_path.parent / "elsewhere.txt"
    assert assess(mode, EDIT, write(target), tmp_path).verdict == verdict  # type: ignore[arg-type]


def test_reads_are_never_asked_and_deny_rules_win(tmp_path: Path) -> None:
    assert (
        assess("read-only", READ, Action(risk="read", summary="read"), tmp_path).verdict == "allow"
    )
    allow, deny = [Rule.parse("bash(git:*)")], [Rule.parse("bash(git push:*)")]
    assert (
        assess("default", BASH, command("git log"), tmp_path, allow=allow, deny=deny).verdict
        == "allow"
    )
    pushed = assess(
        "default", BASH, command("git status && git push --force"), tmp_path, allow=allow, deny=deny
    )
    assert pushed.verdict == "deny"
    assert "git push:*" in pushed.reason
    assert assess("bypass", BASH, command("git push"), tmp_path, deny=deny).verdict == "deny"


def test_session_grants_apply_except_in_read_only_mode(tmp_path: Path) -> None:
    granted = [Rule.parse("bash(pytest:*)")]
    assert (
        assess("default", BASH, command("pytest -x"), tmp_path, granted=granted).verdict == "allow"
    )
    read_only = assess("read-only", BASH, command("pytest -x"), tmp_path, granted=granted)
    assert read_only.verdict == "ask"
    assert read_only.grantable is False


def test_the_rule_offered_for_the_session() -> None:
    def offered(action: Action, tool: ToolDefinition = BASH) -> list[str]:
        return [str(rule) for rule in session_rules(tool, action) or []]

    assert offered(command("git status --short")) == ["bash(git status:*)"]
    assert offered(command("pytest -x tests")) == ["bash(pytest:*)"]
    assert offered(command("ls | grep x")) == ["bash(ls:*)", "bash(grep:*)"]
    assert offered(command("rm -rf build")) == ["bash(rm -rf build)"]
    assert offered(command("git commit -m 'fix it'")) == ["bash(git commit:*)"]
    assert offered(write(Path("/w/a")), EDIT) == ["edit"]


def test_rules_name_tools_by_glob_as_for_mcp_servers(tmp_path: Path) -> None:
    issue = ToolDefinition(
        name="mcp__github__create_issue", description="", arguments=Args, execute=nothing
    )
    other = ToolDefinition(
        name="mcp__jira__create_issue", description="", arguments=Args, execute=nothing
    )
    call = Action(risk="exec", summary="create an issue")
    deny = [Rule.parse("mcp__github__*")]
    for mode in ("default", "bypass"):
        assert assess(mode, issue, call, tmp_path, deny=deny).verdict == "deny"  # type: ignore[arg-type]
    assert assess("bypass", other, call, tmp_path, deny=deny).verdict == "allow"
    allowed = assess("default", other, call, tmp_path, allow=[Rule.parse("mcp__jira__*")])
    assert allowed.verdict == "allow"


def test_a_pattern_is_granted_as_written_and_covers_only_itself(tmp_path: Path) -> None:
    [grant] = session_rules(BASH, command("rm *.tmp")) or []
    assert str(grant) == "bash(rm '*.tmp')"
    assert (
        assess("default", BASH, command("rm *.tmp"), tmp_path, granted=[grant]).verdict == "allow"
    )
    assert assess("default", BASH, command("rm *.txt"), tmp_path, granted=[grant]).verdict == "ask"
    assert session_rules(BASH, command("r? x")) is None  # a program found by a pattern


def test_a_tool_allowed_by_name_still_runs_no_command_the_analysis_cannot_vouch_for(
    tmp_path: Path,
) -> None:
    runner = ToolDefinition(name="runner", description="", arguments=Args, execute=nothing)
    allow = [Rule.parse("runner")]
    assert assess("default", runner, command("make test"), tmp_path, allow=allow).verdict == "allow"
    hidden = assess("default", runner, command("eval 'rm -rf x'"), tmp_path, allow=allow)
    assert hidden.verdict == "ask"
    assert hidden.grantable is False
