"""Custom commands: how a file becomes a command, and how its prompt is filled in."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.llm import user_text
from dsh.runtime import start_runtime
from dsh.services import COMMANDS
from dsh.testing import FakeLLM, Reply
from dsh_plugins.custom_commands.expand import arguments, commands
from dsh_plugins.custom_commands.files import scan
from tests.plugins.bash_support import eventually


def test_arguments_fill_the_placeholders_or_go_at_the_end() -> None:
    assert arguments("Fix $1 in $2 ($ARGUMENTS)", 'bug "src/a b.py"') == (
        'Fix bug in src/a b.py (bug "src/a b.py")'
    )
    assert arguments("Fix $3.", "one two") == "Fix ."
    assert arguments("Summarise the diff.", "briefly") == "Summarise the diff.\n\nbriefly"
    assert arguments("Summarise the diff.", "") == "Summarise the diff."
    assert arguments("Quote: $1", 'it"s') == 'Quote: it"s'  # an unclosed quote: words as typed


async def test_bang_lines_and_inline_bangs_run_in_order() -> None:
    ran: list[str] = []

    async def run(command: str) -> str:
        ran.append(command)
        return f"out of {command}\n"

    text = "Start.\n!git status\nBranch: !`git branch --show-current`, and `code` stays.\nEnd."
    assert await commands(text, run) == (
        "Start.\n$ git status\nout of git status\n"
        "Branch: out of git branch --show-current, and `code` stays.\nEnd."
    )
    assert ran == ["git status", "git branch --show-current"]
    assert await commands("No bangs! Really!", run) == "No bangs! Really!"


def test_files_make_commands_namespaces_and_the_project_wins(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / "commands" / "frontend").mkdir(parents=True)
    (home / "commands" / "Deploy.md").write_text(
        "---\ndescription: Ship it\nargument-hint: ENV\nallowed-tools: Bash(git:*)\n---\nShip $1.\n"
    )
    (home / "commands" / "frontend" / "lint.md").write_text("Lint from home.\n")
    (home / "commands" / "my notes.md").write_text("Not a command name.\n")
    (home / "commands" / "broken.md").write_text("---\ndescription: no end\n")
    (home / "commands" / "empty.md").write_text("---\ndescription: nothing\n---\n\n")
    (project / ".dsh" / "commands" / "frontend").mkdir(parents=True)
    (project / ".dsh" / "commands" / "frontend" / "lint.md").write_text("Lint the project.\n")

    found, skipped = scan(home, project)
    assert sorted(found) == ["deploy", "frontend:lint"]
    deploy = found["deploy"]
    assert (deploy.description, deploy.hint, deploy.body) == ("Ship it", "ENV", "Ship $1.")
    assert deploy.allowed_tools == "Bash(git:*)"
    assert found["frontend:lint"].origin == "project"
    assert found["frontend:lint"].body == "Lint the project."
    reasons = {path.name: reason for path, reason in ((s.path, s.reason) for s in skipped)}
    assert set(reasons) == {"my notes.md", "broken.md", "empty.md"}
    assert "cannot be a command name" in reasons["my notes.md"]
    assert "closing" in reasons["broken.md"]

    untrusted, _ = scan(home, None)  # an untrusted project is not looked in
    assert untrusted["frontend:lint"].body == "Lint from home."


async def test_a_file_written_while_dsh_runs_is_a_command_after_the_next_prompt(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))
    runtime = await start_runtime(
        home=home,
        cwd=tmp_path,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
    )
    try:
        commands = runtime.root.get(COMMANDS).service
        assert commands.get("later") is None
        (home / "commands").mkdir(parents=True, exist_ok=True)
        (home / "commands" / "later.md").write_text("Written later.\n")
        fake_llm.add(Reply(text="ok"))
        agent = await runtime.agents.create(tmp_path)
        agent.followup(user_text("hello"))
        await agent.when_idle()
        await eventually(lambda: commands.get("later") is not None)
        (home / "commands" / "later.md").unlink()
        fake_llm.add(Reply(text="ok"))
        agent.followup(user_text("again"))
        await agent.when_idle()
        await eventually(lambda: commands.get("later") is None)
    finally:
        await runtime.aclose()


def test_claude_codes_command_folders_are_read_and_dshs_own_win(tmp_path: Path) -> None:
    home, project, claude = tmp_path / "home", tmp_path / "project", tmp_path / "claude"
    (claude / "commands").mkdir(parents=True)
    (claude / "commands" / "review.md").write_text("Review from ~/.claude.\n")
    (claude / "commands" / "deploy.md").write_text("Deploy from ~/.claude.\n")
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "test.md").write_text("Test from .claude.\n")
    (project / ".claude" / "commands" / "review.md").write_text("Review from .claude.\n")
    (home / "commands").mkdir(parents=True)
    (home / "commands" / "deploy.md").write_text("Deploy from dsh.\n")

    found, _ = scan(home, project, claude)
    assert {name: file.body for name, file in found.items()} == {
        "review": "Review from .claude.",  # the project's over the user's
        "deploy": "Deploy from dsh.",  # dsh's own over Claude Code's
        "test": "Test from .claude.",
    }
    untrusted, _ = scan(home, None, claude)  # an untrusted project's .claude is not read
    assert sorted(untrusted) == ["deploy", "review"]
    assert untrusted["review"].body == "Review from ~/.claude."
    off, _ = scan(home, project, None)  # [claude_code] read = false
    assert sorted(off) == ["deploy"]
