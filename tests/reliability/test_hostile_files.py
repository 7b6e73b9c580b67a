"""Files and arguments that would hang dsh or surface as a crash, through the real binary.

A named pipe is opened by a plain ``open`` only once a writer comes, so one in a
repository (``@pipe`` in a prompt, a ``.gitignore`` beside a mentioned folder, a
project's command, agent or skill file, its ``.env``) used to hold ``dsh -p``
forever. A NUL character in a command line reached the operating system
and came back as a ``ValueError``. Each is now refused with a clear message, and the
run goes on.
"""

from __future__ import annotations

import os
from typing import Any

from dsh.session import SessionEvent, ToolResult
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.trust import TrustStore
from tests.e2e.harness import Dsh, text_of, user_texts


def _results(events: list[SessionEvent]) -> list[ToolResult]:
    return [e.data for e in events if isinstance(e.data, ToolResult)]


def _result_text(result: ToolResult) -> str:
    block: Any = result.message.content[0]
    return "".join(getattr(part, "text", "") for part in block.content)


async def test_a_mentioned_named_pipe_is_refused_not_waited_on(dsh: Dsh, fake_llm: FakeLLM) -> None:
    os.mkfifo(dsh.project / "pipe")
    folder = dsh.project / "sub"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n")
    os.mkfifo(folder / ".gitignore")
    fake_llm.add(Reply(text="Looked."))

    done = await dsh.run("-p", "look at @pipe and @sub")

    assert done.code == 0, done.stderr
    assert done.stdout == "Looked.\n"
    sent = "\n".join(user_texts(fake_llm.chat_requests[0].body))
    assert "@pipe: not a regular file, so not read" in sent
    assert "notes.txt" in sent  # the folder is listed, its .gitignore skipped


async def test_named_pipes_in_a_trusted_project_do_not_hang_start_up(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    TrustStore(dsh.home).decide(dsh.project.resolve(), trusted=True)
    for relative in (
        ".dsh/commands/piped.md",
        ".dsh/agents/piped.md",
        ".claude/agents/piped.md",
        ".dsh/skills/piped/SKILL.md",
        "AGENTS.md",
        ".env",
        ".dsh/settings.toml",  # taken as absent: only a regular file configures
    ):
        path = dsh.project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
    fake_llm.add(Reply(text="Started."))

    done = await dsh.run("-p", "hello")

    assert done.code == 0, done.stderr
    assert done.stdout == "Started.\n"
    assert len(fake_llm.chat_requests) == 1


async def test_nul_characters_in_commands_are_refused_before_anything_runs(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    made = dsh.project / "made"
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="bash", arguments={"command": "touch made\x00", "description": "touch"}
                ),
                ToolCallSpec(
                    name="bash",
                    arguments={"command": "touch made", "description": "touch", "workdir": "a\x00"},
                ),
                ToolCallSpec(name="grep", arguments={"pattern": "x", "path": "a\x00b"}),
                ToolCallSpec(name="terminal_open", arguments={"command": "touch made\x00"}),
            ]
        ),
        Reply(text="None of them ran."),
    )

    done = await dsh.run("-p", "run them", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert not made.exists()
    results = _results(await dsh.checked_events())
    assert [r.error.code if r.error else None for r in results] == ["INVALID_ARGUMENTS"] * 4
    texts = [_result_text(r) for r in results]
    assert "the command contains a NUL character" in texts[0]
    assert "workdir must not contain a NUL character" in texts[1]
    assert "path must not contain a NUL character" in texts[2]
    assert "command must not contain a NUL character" in texts[3]
    # What the model was told is what the log holds.
    told = [text_of(m) for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "tool"]
    assert told == texts
