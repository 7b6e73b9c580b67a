"""One send policy for every front end, through the real binary: an unknown ``/word``,
a command of a plugin that failed to load, and an untrusted project's command get the
same answer in ``dsh -p``, stream-json and an editor (ACP) as in the TUI and plain
mode (tests/ui/test_tui_start.py, tests/ui/test_plain.py), and none reaches the model.
"""

from __future__ import annotations

import asyncio

from dsh.testing import FakeLLM, Reply
from dsh.ui.session_controller import unknown_command
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import SETTINGS, TIMEOUT, Dsh, close_stdin, finish, send

UNKNOWN = unknown_command("frobnicate")


async def test_an_unknown_word_is_refused_in_dsh_p(dsh: Dsh, fake_llm: FakeLLM) -> None:
    done = await dsh.run("-p", "/frobnicate the widgets")

    assert done.code == 1
    assert f"dsh: {UNKNOWN}\n" in done.stderr
    assert done.stdout == ""
    assert fake_llm.chat_requests == []


async def test_an_unknown_word_is_refused_in_stream_json(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Hello."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "/frobnicate"}, {"type": "prompt", "text": "hi"})
    await close_stdin(child)
    done = await finish(child, stdin=None)

    assert f"dsh: {UNKNOWN}\n" in done.stderr
    assert UNKNOWN not in done.stdout  # stdout holds only records
    # Only the real prompt reached the model.
    [request] = fake_llm.chat_requests
    assert "frobnicate" not in str(request.body["messages"])


async def test_an_unknown_word_is_refused_in_an_editor(dsh: Dsh, fake_llm: FakeLLM) -> None:
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("/frobnicate")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
        assert UNKNOWN in editor.text()
    assert fake_llm.chat_requests == []


async def test_a_failed_plugins_command_names_the_plugin(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS.replace('"tests.support.echo_tool"', '"tests.support.echo_tool", "no_such_plugin"')
    )

    done = await dsh.run("-p", "/its-command")

    assert done.code == 1
    assert "Unknown command /its-command (/help lists them)." in done.stderr
    assert "no_such_plugin failed to load" in done.stderr
    assert "`dsh plugins` says why" in done.stderr
    assert fake_llm.chat_requests == []


async def test_an_untrusted_projects_command_says_it_was_skipped(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    commands = dsh.project / ".dsh" / "commands"
    commands.mkdir(parents=True)
    (commands / "deploy.md").write_text("Deploy everything to production now.\n")

    done = await dsh.run("-p", "/deploy")

    assert done.code == 1
    assert "/deploy is this project's command and was skipped" in done.stderr
    assert "not trusted" in done.stderr
    assert fake_llm.chat_requests == []
    # Trusted, it is the project's command: its prompt goes to the model.
    fake_llm.add(Reply(text="Deploying."))
    trusted = await dsh.run("-p", "--trust", "/deploy")
    assert trusted.code == 0, trusted.stderr
    [request] = fake_llm.chat_requests
    assert "Deploy everything to production now." in str(request.body["messages"])
