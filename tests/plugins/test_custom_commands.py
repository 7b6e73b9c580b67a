"""Custom commands: how a file becomes a command, and how its prompt is filled in."""

from __future__ import annotations

from pathlib import Path

from plugins.custom_commands.expand import arguments, commands
from plugins.custom_commands.files import scan


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
