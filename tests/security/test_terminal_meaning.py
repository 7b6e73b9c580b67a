"""Terminal lines that mean something else than they read.

dsh judges what is typed into a shell terminal as the command it reads. A shell may
run something else: history expansion (``ls !!:2 !!:4-5`` after ``echo X; echo touch
PWNED`` is ``ls ; touch PWNED``), an alias or a function defined earlier in the same
terminal, ``fc``, a changed ``PATH``, keys that run the line without Enter. Each
attack runs through ``dsh -p`` against the scripted server, under allow rules for
``echo`` and ``ls`` and the shell terminal; none may make ``PWNED``, and the ordinary
lines beside them still run unasked.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh_plugins.terminal.meaning import Meaning, unreadable
from tests.e2e.harness import Dsh, close_stdin, finish, send, stream_events

RULES = ["terminal_open(shell)", "bash(echo:*)", "bash(ls:*)"]
NOT_RUN = "Error: terminal_send was not run"


def allow(dsh: Dsh, rules: list[str] = RULES) -> None:
    settings = dsh.home / "settings.toml"
    settings.write_text(settings.read_text() + f"\n[permissions]\nallow = {json.dumps(rules)}\n")


def typed(text: str = "", keys: list[str] | None = None) -> Reply:
    arguments: dict[str, Any] = {"terminal_id": "t1", "text": text}
    if keys:
        arguments["keys"] = keys
    return Reply(tool_calls=[ToolCallSpec(name="terminal_send", arguments=arguments)])


OPEN = Reply(tool_calls=[ToolCallSpec(name="terminal_open", arguments={})])
READ = Reply(
    tool_calls=[
        ToolCallSpec(
            name="terminal_read",
            arguments={"terminal_id": "t1", "wait": "quiet", "quiet_ms": 500},
        )
    ]
)


def tool_texts(server: FakeLLM) -> list[str]:
    body = server.chat_requests[-1].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_history_expansion_does_not_turn_an_allowed_ls_into_touch(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    allow(dsh)
    fake_llm.add(
        OPEN,
        typed("echo X; echo touch PWNED\n"),
        typed("ls !!:2 !!:4-5\n"),
        typed('echo "!!:4-5"\n'),
        typed("ls\n"),  # the control: an ordinary allowed line runs unasked
        READ,
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "list the files")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert not (dsh.project / "PWNED").exists(), texts
    assert not texts[1].startswith("Error"), texts[1]
    for refused in texts[2:4]:
        assert refused.startswith(NOT_RUN), refused
        assert "history" in refused, refused
    assert not texts[4].startswith("Error"), texts[4]


async def test_the_shell_has_history_expansion_off_even_when_everything_is_allowed(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """Bypass mode allows every line: the line still means what it reads."""
    fake_llm.add(
        OPEN,
        typed("echo X; echo touch PWNED\n"),
        typed("ls !!:2 !!:4-5\n"),
        typed("echo flags=$-\n"),
        READ,
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "list the files", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert not (dsh.project / "PWNED").exists(), texts
    [flags] = re.findall(r"flags=([A-Za-z]+)", "\n".join(texts))
    assert "i" in flags, flags  # interactive
    assert "H" not in flags, flags  # without history expansion


async def _approving(dsh: Dsh, lines: list[str], approve: set[str]) -> list[str]:
    """Run a stream-json session that types ``lines`` one call each; approval requests
    whose summary holds one of ``approve`` are allowed once, the rest denied. Returns
    the summaries of every approval asked."""
    fake_llm = dsh.server
    fake_llm.add(OPEN, *(typed(line) for line in lines), READ, Reply(text="Done."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "work in the terminal"})
    asked: list[str] = []
    async for line in stream_events(child):
        if line.get("type") == "approval-request":
            summary = str(line["summary"])
            asked.append(summary)
            outcome = "allow_once" if any(a in summary for a in approve) else "deny"
            await send(
                child, {"type": "approval", "requestId": line["requestId"], "outcome": outcome}
            )
        if line.get("type") == "turn/end":
            break
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    return asked


@pytest.mark.parametrize(
    ("definition", "name"),
    [
        ("alias ls='touch PWNED'", "alias"),
        ("ls() { touch PWNED; }", "function"),
        ("function ls { touch PWNED; }", "function keyword"),
        ("BASH_ALIASES[ls]='touch PWNED'", "alias by assignment"),
        ("PATH=.:$PATH", "PATH"),
    ],
)
async def test_a_name_defined_in_the_terminal_is_not_the_allowed_program(
    dsh: Dsh, fake_llm: FakeLLM, definition: str, name: str
) -> None:
    """The person allows the definition once (it is asked: no rule vouches for it); the
    allowed ``ls`` typed after it is asked again, since it no longer runs ls."""
    allow(dsh)
    (dsh.project / "ls").write_text("#!/bin/sh\ntouch PWNED\n")
    (dsh.project / "ls").chmod(0o755)
    asked = await _approving(dsh, [definition + "\n", "ls\n"], approve={definition[:6]})

    assert not (dsh.project / "PWNED").exists(), (name, asked)
    assert len(asked) == 2, asked
    assert asked[1].endswith("'ls\n'"), asked


async def test_fc_and_history_lines_are_asked(dsh: Dsh, fake_llm: FakeLLM) -> None:
    allow(dsh)
    fake_llm.add(
        OPEN,
        typed("echo touch PWNED\n"),
        typed("fc -s 'echo '=\n"),
        typed("history -s 'touch PWNED'\n"),
        typed("ls\n"),
        READ,
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "list the files")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert not (dsh.project / "PWNED").exists(), texts
    assert texts[2].startswith(NOT_RUN), texts
    assert texts[3].startswith(NOT_RUN), texts
    assert not texts[4].startswith("Error"), texts[4]


async def test_keys_that_run_the_line_without_enter_are_never_granted(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """``C-o`` (operate-and-get-next) runs the line as Enter does: a session grant on
    the shell's keys (``terminal_send(shell)``) does not cover it."""
    allow(dsh, [*RULES, "terminal_send(shell)"])
    fake_llm.add(
        OPEN,
        typed("touch PWNED"),
        typed(keys=["C-o"]),
        typed(keys=["C-x", "C-e"]),
        typed(keys=["C-u"]),
        typed(keys=["Up"]),  # the control: keys that only edit the line are allowed
        READ,
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "type it")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert not (dsh.project / "PWNED").exists(), texts
    assert texts[2].startswith(NOT_RUN), texts
    assert texts[3].startswith(NOT_RUN), texts
    assert not texts[5].startswith("Error"), texts[5]


# ---------------------------------------------------------------------- line by line


@pytest.mark.parametrize(
    "line",
    [
        "ls !!:2 !!:4-5",
        'echo "!!"',
        "echo !$",
        "echo !-2",
        "^ls^rm",
        "fc -s",
        "history -s 'rm -rf ~'",
        "alias ls='rm -rf ~'",
        "ls() { rm -rf ~; }",
        "function ls { rm -rf ~; }",
        "BASH_ALIASES[ls]=rm",
        "BASH_CMDS[ls]=/tmp/rm",
        "PATH=.:$PATH",
        "export PATH=.:$PATH",
        "declare -x PATH=.",
        "read PATH",
        "printf -v PATH .",
        "echo ${PATH:=.}",
        "IFS=/",
        "PROMPT_COMMAND='rm -rf ~'",
        "PS1='$(rm -rf ~)'",
        "trap 'rm -rf ~' DEBUG",
        "set -H",
        "set -o vi",
        "shopt -s expand_aliases",
        "bind -x '\"\\C-t\": rm'",
        "enable -n echo",
        "hash -p /tmp/rm ls",
        "source ./x",
        ". ./x",
        "eval ls",
        "exec bash --rcfile x",
        "command source x",
        "declare $name=1",
    ],
)
def test_lines_that_do_not_read_as_written(line: str) -> None:
    assert unreadable(line) is not None, line


@pytest.mark.parametrize(
    "line",
    [
        "ls -la",
        "echo 'a!b'",
        "echo hi!",
        "echo \\!\\!",
        "[ ! -f x ] && echo no",
        "echo $PATH",
        "grep PATH notes.txt",
        "export DEBUG=1",
        "x=1",
        "history",
        "history 5",
        "alias",
        "set",
        "shopt extglob",
        "bind -p",
        "git status",
        "ls --color=auto",
    ],
)
def test_lines_that_read_as_written(line: str) -> None:
    assert unreadable(line) is None, line


def test_a_terminal_remembers_what_its_lines_defined() -> None:
    meaning = Meaning()
    meaning.ran("alias ll='ls -l'; f() { echo; }")
    assert meaning.judge("ll") is not None
    assert meaning.judge("f x") is not None
    assert meaning.judge("ls") is None  # a name nobody defined still reads as written
    meaning.ran("export DEBUG=1")
    assert meaning.judge("ls") is None
    meaning.ran("PATH=.:$PATH")
    assert meaning.judge("ls") is not None  # every line, from now on
    assert meaning.judge("echo hi") is not None
