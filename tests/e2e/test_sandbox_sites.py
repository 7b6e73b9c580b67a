"""Through the real binary (``dsh -p`` against the scripted server): a terminal the
model opens, a custom command's ``!`` line and a project's hook run inside the OS
sandbox; a hook of the user's own settings runs outside, as the user's own program.

The child gets a home the sandbox can see (tests/support/sandboxing.py), so a write
to ``~/.bashrc`` is refused because the home is read-only inside, not because it is
missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.trust import TrustStore
from tests.e2e.harness import SETTINGS, Dsh, text_of
from tests.support.sandboxing import visible_home
from tests.support.waits import HANG_S

CANARY = "canary-0d5b1e2f77"
"""In dsh's environment under a secret-looking name: no child's environment carries
it, so only a read of dsh's own ``/proc/PID/environ`` shows it."""


@pytest.fixture
def home(dsh: Dsh) -> Iterator[Path]:
    with visible_home() as folder:
        dsh.environment.update(HOME=str(folder), SANDBOX_TEST_TOKEN=CANARY)
        yield folder


def tool_texts(body: dict[str, Any]) -> str:
    return "\n".join(text_of(m) for m in body["messages"] if m["role"] == "tool")


async def test_a_terminal_the_model_opens_is_inside(
    dsh: Dsh, fake_llm: FakeLLM, home: Path
) -> None:
    # A script in the repository, as a hostile one would be: the permission engine
    # refuses a command line naming /proc, not what a script it runs reads.
    (dsh.project / "probe.sh").write_text(
        "echo pwned >> ~/.bashrc; echo bashrc=$?\n"
        "grep -aho 'canary-[0-9a-f]*' /proc/[0-9]*/environ; echo environ-checked\n"
        "echo via-dev-tty > /dev/tty; tty; echo terminal-done\n"
    )
    command = "bash probe.sh"
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="terminal_open", arguments={"command": command})]),
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="terminal_read",
                    arguments={
                        "terminal_id": "t1",
                        "wait": "exit",
                        "timeout_ms": round(HANG_S * 1000),
                    },
                )
            ]
        ),
        Reply(text="Done."),
    )
    done = await dsh.run("-p", "open a terminal", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    said = tool_texts(fake_llm.chat_requests[-1].body)
    assert "terminal-done" in said, said
    assert not (home / ".bashrc").exists()
    assert "bashrc=1" in said
    assert "environ-checked" in said
    assert CANARY not in said  # no process of dsh's is there to read
    assert "via-dev-tty" in said
    assert "not a tty" not in said


async def test_a_custom_commands_bang_line_cannot_write_outside_the_project(
    dsh: Dsh, fake_llm: FakeLLM, home: Path
) -> None:
    (dsh.home / "commands").mkdir()
    (dsh.home / "commands" / "leak.md").write_text(
        "Say done.\n!echo leaked >> ~/.bashrc; echo home=$?; echo inside > kept.txt; echo here=$?\n"
    )
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "/leak", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    sent = json.dumps(fake_llm.chat_requests[0].body["messages"])
    assert "home=1" in sent
    assert "here=0" in sent
    assert not (home / ".bashrc").exists()
    assert (dsh.project / "kept.txt").read_text() == "inside\n"


def hook(event: str, command: str) -> str:
    return (
        f'[[hooks.{event}]]\nmatcher = ""\n'
        f'hooks = [{{ type = "command", command = {json.dumps(command)} }}]\n'
    )


async def test_a_projects_hook_runs_inside_and_the_users_own_outside(
    dsh: Dsh, fake_llm: FakeLLM, home: Path
) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS + hook("SessionStart", "echo from-user-hook >> ~/.bashrc")
    )
    (dsh.project / ".dsh").mkdir()
    (dsh.project / ".dsh" / "settings.toml").write_text(
        hook(
            "UserPromptSubmit",
            "echo from-project-hook >> ~/.bashrc; echo project-hook-ran > ran.txt",
        )
    )
    TrustStore(dsh.home).decide(dsh.project.resolve(), trusted=True)
    fake_llm.add(Reply(text="Hello."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr[-3000:]
    assert (dsh.project / "ran.txt").read_text() == "project-hook-ran\n"  # it ran, inside
    assert (home / ".bashrc").read_text() == "from-user-hook\n"
