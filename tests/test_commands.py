"""The commands service: registering, completing, running and logging commands."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dsh.commands import (
    Command,
    CommandContext,
    CommandError,
    CommandService,
    parse_command,
)
from dsh.kernel import Context
from dsh.llm import new_session_id
from dsh.services import COMMANDS
from dsh.session import Session
from dsh.session.header import SessionHeader
from dsh.session.payloads import CommandDone, CommandRun
from tests.support.command_host import RecordingHost


@dataclass
class Agent:
    session: Session


def test_parse_command() -> None:
    assert parse_command("/compact focus on tests") == ("compact", "focus on tests")
    assert parse_command("  /help ") == ("help", "")
    assert parse_command("/usr/bin is a path") is None
    assert parse_command("hello /help") is None


async def test_commands_run_complete_and_log_their_runs() -> None:
    root = Context(name="test")
    root.provide(COMMANDS, CommandService())
    plugin = root.child(name="plugin")
    commands = plugin.get(COMMANDS)
    ran: list[str] = []

    async def echo(context: CommandContext, args: str) -> None:
        ran.append(args)
        context.host.show(f"echo {args}")

    async def broken(context: CommandContext, args: str) -> None:
        raise CommandError("nothing to compact yet")

    async def crashing(context: CommandContext, args: str) -> None:
        raise KeyError("bug")

    commands.register("echo", Command("echo", "Say it back", echo, arguments="TEXT"))
    commands.register("compact", Command("compact", "Compact", broken))
    commands.register("crash", Command("crash", "Crash", crashing))
    commands.register("theme", Command("theme", "Theme", echo, recorded=False))
    assert [c.name for c in root.get(COMMANDS).complete("c")] == ["compact", "crash"]

    session = Session(SessionHeader(id=new_session_id(), created_at=1, cwd="/w"), [])
    host = RecordingHost()
    context = CommandContext(agent=Agent(session), root=root, host=host)
    assert await root.get(COMMANDS).run("/echo hi there", context)
    assert await root.get(COMMANDS).run("/compact", context)
    assert await root.get(COMMANDS).run("/crash", context)
    assert await root.get(COMMANDS).run("/theme dark", context)
    assert not await root.get(COMMANDS).run("/nope", context)
    assert not await root.get(COMMANDS).run("plain text", context)
    assert ran == ["hi there", "dark"]
    assert host.shown[0] == ("info", "echo hi there")
    # A recorded command's failure is shown from the log, once, not by the host too.
    assert host.shown[1:] == [("info", "echo dark")]

    logged = [(e.type, e.data) for e in session.events]
    runs = [d.name for t, d in logged if isinstance(d, CommandRun)]
    assert runs == ["echo", "compact", "crash"]  # /theme is not recorded
    done = [(d.kind, d.text) for t, d in logged if isinstance(d, CommandDone)]
    assert done[:2] == [("success", None), ("error", "nothing to compact yet")]
    assert done[2][0] == "error"
    assert "KeyError" in str(done[2][1])

    await plugin.dispose()  # a plugin's commands go with it
    assert root.get(COMMANDS).get("echo") is None


def test_command_names_are_checked() -> None:
    async def run(context: CommandContext, args: str) -> None:
        pass

    with pytest.raises(ValueError, match="must match"):
        Command("Bad Name", "x", run)
