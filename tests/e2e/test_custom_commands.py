"""Custom slash commands through the real binary: ``dsh -p "/name args"`` against the
scripted server, the command files in the home's and a project's ``commands/``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.trust import TrustStore
from tests.e2e.harness import Dsh

REVIEW = """\
---
description: Review a file for one concern
argument-hint: FILE CONCERN
model: deepseek-v4-pro
---
Review $1 for $2. The whole request: $ARGUMENTS.
Here is the file: @$1
The branch is:
!echo on-branch-main
Files here: !`ls`
"""


def user_texts(request_body: dict[str, object]) -> list[str]:
    messages = request_body["messages"]
    assert isinstance(messages, list)
    return [json.dumps(m["content"]) for m in messages if m["role"] == "user"]


async def test_a_command_with_arguments_a_mention_and_bang_lines(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    (dsh.home / "commands").mkdir()
    (dsh.home / "commands" / "review.md").write_text(REVIEW)
    # The ! lines are calls like any: allowed by the user's rules, as a person would.
    with (dsh.home / "settings.toml").open("a") as settings:
        settings.write('[permissions]\nallow = ["bash(echo:*)", "bash(ls)"]\n')
    (dsh.project / "app.py").write_text("def handler():\n    return 'SECRET-FREE BODY'\n")
    fake_llm.add(Reply(text="Looks fine."))
    done = await dsh.run("-p", '/review app.py "error handling"')
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "Looks fine.\n"
    [request] = fake_llm.chat_requests
    assert request.body["model"] == "deepseek-v4-pro"  # the file's model, for its turn
    sent = "\n".join(user_texts(request.body))
    assert "Review app.py for error handling." in sent
    assert 'The whole request: app.py \\"error handling\\"' in sent
    assert "$ echo on-branch-main\\non-branch-main" in sent  # the ! line ran
    assert "Files here: app.py" in sent  # and the inline one
    assert "SECRET-FREE BODY" in sent  # the @ mention attached the file


async def test_a_bang_line_is_asked_about_like_any_call_and_denied_headless(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """A command file cannot run what the permissions would not: ``dsh -p`` has no one
    to ask, so a command with effects is denied and the file is not written."""
    (dsh.home / "commands").mkdir()
    marker = dsh.root / "written"
    (dsh.home / "commands" / "touchy.md").write_text(f"Say done.\n!touch {marker}\n")
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "/touchy")
    assert done.code == 0, done.stderr[-3000:]
    assert not marker.exists()
    sent = "\n".join(user_texts(fake_llm.chat_requests[0].body))
    assert "(not run:" in sent


async def test_folders_make_namespaces_and_the_project_wins(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "commands" / "frontend").mkdir(parents=True)
    (dsh.home / "commands" / "frontend" / "lint.md").write_text("Lint from home.\n")
    (dsh.project / ".git").mkdir()
    (dsh.project / ".dsh" / "commands" / "frontend").mkdir(parents=True)
    (dsh.project / ".dsh" / "commands" / "frontend" / "lint.md").write_text("Lint the project.\n")
    TrustStore(dsh.home).decide(dsh.project.resolve(), trusted=True)
    fake_llm.add(Reply(text="Linted."))
    done = await dsh.run("-p", "/frontend:lint")
    assert done.code == 0, done.stderr[-3000:]
    sent = "\n".join(user_texts(fake_llm.chat_requests[0].body))
    assert "Lint the project." in sent
    assert "Lint from home." not in sent


async def test_an_untrusted_projects_commands_are_not_there(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """A cloned repository's ``.dsh/commands`` is not read until the folder is
    trusted: its command is refused with that reason (nothing goes to the model), and
    its ``!`` line never runs."""
    marker = dsh.root / "ran"
    (dsh.project / ".git").mkdir()
    (dsh.project / ".dsh" / "commands").mkdir(parents=True)
    (dsh.project / ".dsh" / "commands" / "setup.md").write_text(f"Go.\n!echo x > {marker}\n")
    done = await dsh.run("-p", "/setup")
    assert done.code == 1
    assert "/setup is this project's command and was skipped" in done.stderr
    assert not marker.exists()
    assert fake_llm.chat_requests == []


ALLOWED = """\
---
description: Touch the marker
allowed-tools: Bash(touch:*), Bash(git status:*)
---
Touch it.
!touch {before}
"""


def bash(command: str) -> ToolCallSpec:
    return ToolCallSpec(name="bash", arguments={"command": command, "description": "test"})


async def test_allowed_tools_hold_for_the_commands_own_turn_only(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """``allowed-tools`` lets the command's ``!`` lines and its turn's calls run
    unasked (``dsh -p`` has no one to ask, so anything else is denied): a call beyond
    its rules is denied in that turn, and the next turn's same call is denied too."""
    # In the project: the sandbox lets commands write nowhere else.
    before, during, beyond, after = (
        dsh.project / n for n in ("before", "during", "beyond", "after")
    )
    (dsh.home / "commands").mkdir()
    (dsh.home / "commands" / "touch.md").write_text(ALLOWED.format(before=before))
    fake_llm.add(
        Reply(tool_calls=[bash(f"touch {during}")]),
        Reply(tool_calls=[bash(f"rm -f {before} && touch {beyond}")]),
        Reply(text="Touched."),
    )
    done = await dsh.run("-p", "/touch")
    assert done.code == 0, done.stderr[-3000:]
    assert before.exists()  # the ! line, under the command's rules
    assert during.exists()  # the model's call in the command's turn
    assert not beyond.exists()  # beyond the rules: denied
    assert before.exists()

    fake_llm.add(Reply(tool_calls=[bash(f"touch {after}")]), Reply(text="Could not."))
    done = await dsh.run("-p", "touch it again", "--continue")
    assert done.code == 0, done.stderr[-3000:]
    assert not after.exists()  # the next turn has only the settings' rules


async def test_a_deny_rule_outweighs_allowed_tools(dsh: Dsh, fake_llm: FakeLLM) -> None:
    before, during = dsh.root / "before", dsh.root / "during"
    with (dsh.home / "settings.toml").open("a") as settings:
        settings.write('[permissions]\ndeny = ["bash(touch:*)"]\n')
    (dsh.home / "commands").mkdir()
    (dsh.home / "commands" / "touch.md").write_text(ALLOWED.format(before=before))
    fake_llm.add(Reply(tool_calls=[bash(f"touch {during}")]), Reply(text="Denied."))
    done = await dsh.run("-p", "/touch")
    assert done.code == 0, done.stderr[-3000:]
    assert not before.exists()
    assert not during.exists()


async def test_claude_codes_commands_are_commands_and_dshs_own_win(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """``~/.claude/commands/`` (``$CLAUDE_CONFIG_DIR``) and a trusted project's
    ``.claude/commands/`` are read as ``.dsh/commands/`` is; a cloned repository's only
    once trusted, and a command of dsh's own of the same name wins."""
    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    (claude / "commands").mkdir(parents=True)
    (claude / "commands" / "explain.md").write_text("Explain it from ~/.claude.\n")
    (claude / "commands" / "ship.md").write_text("Ship from ~/.claude.\n")
    (dsh.home / "commands").mkdir(parents=True)
    (dsh.home / "commands" / "ship.md").write_text("Ship from dsh.\n")
    (dsh.project / ".git").mkdir()
    (dsh.project / ".claude" / "commands").mkdir(parents=True)
    (dsh.project / ".claude" / "commands" / "setup.md").write_text("Set up from .claude.\n")
    fake_llm.add(Reply(text="1."), Reply(text="2."), Reply(text="3."))
    for prompt in ("/explain", "/ship"):
        done = await dsh.run("-p", prompt)
        assert done.code == 0, done.stderr[-3000:]
    untrusted = await dsh.run("-p", "/setup")
    assert untrusted.code == 1  # untrusted: refused, with why
    assert "/setup is this project's command and was skipped" in untrusted.stderr
    done = await dsh.run("-p", "/setup", "--trust")
    assert done.code == 0, done.stderr[-3000:]
    sent = ["\n".join(user_texts(request.body)) for request in fake_llm.chat_requests]
    assert "Explain it from ~/.claude." in sent[0]
    assert "Ship from dsh." in sent[1]
    assert "Set up from .claude." in sent[2]
