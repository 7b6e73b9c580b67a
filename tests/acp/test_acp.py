"""``dsh acp`` end to end: the real binary, driven by the SDK's client side over its
stdin and stdout, against the scripted model server."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import RequestError
from acp.schema import (
    AgentPlanUpdate,
    AvailableCommandsUpdate,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    TextContentBlock,
    TextResourceContents,
    UsageUpdate,
)
from acp.schema import (
    ResourceContentBlock as ResourceLinkBlock,
)

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh


def edit(path: str, old: str, new: str) -> Reply:
    return Reply(
        tool_calls=[
            ToolCallSpec(
                name="edit",
                arguments=json.dumps({"file_path": path, "old_string": old, "new_string": new}),
            )
        ]
    )


def read(path: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="read", arguments=json.dumps({"file_path": path}))])


async def test_a_prompt_streams_thoughts_and_text(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(reasoning="The person greets me.", text="Hello from dsh."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        assert session.modes is not None
        assert session.modes.current_mode_id == "default"
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("hi")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
        assert reply.usage is not None
        assert reply.usage.output_tokens > 0
        [context] = [u for u in editor.updates if isinstance(u, UsageUpdate)]
        assert 0 < context.used < context.size
        assert editor.thoughts() == "The person greets me."
        assert editor.text() == "Hello from dsh."
        commands = [u for u in editor.updates if isinstance(u, AvailableCommandsUpdate)]
        assert commands
        offered = {c.name for c in commands[0].available_commands}
        assert "cost" in offered
        # dsh cannot end itself here: the editor ends its sessions.
        assert not offered & {"exit", "quit"}
    # The session is dsh's own: stored, sound, with the prompt as sent.
    events = await dsh.checked_events(session.session_id)
    assert [e.type for e in events].count("turn/end") == 1
    # Streamed as it came: a chunk for each text delta the log holds.
    deltas = [
        e for e in events if e.type == "assistant/chunk" and e.data.chunk.type == "text-delta"
    ]
    chunks = [u for u in editor.updates if type(u).__name__ == "AgentMessageChunk"]
    assert len(chunks) == len(deltas)
    users = [m for m in fake_llm.chat_requests[0].body["messages"] if m["role"] == "user"]
    assert users[-1]["content"] in ("hi", [{"type": "text", "text": "hi"}])


async def test_an_edit_asks_once_then_always(dsh: Dsh, fake_llm: FakeLLM) -> None:
    target = dsh.project / "app.py"
    target.write_text("a = 1\nb = 2\n")
    fake_llm.add(
        read("app.py"),
        edit("app.py", "a = 1", "a = 10"),
        Reply(text="Edited a."),
        edit("app.py", "b = 2", "b = 20"),
        Reply(text="Edited b."),
        edit("app.py", "a = 10", "a = 100"),
        Reply(text="Edited a again."),
    )
    editor = Editor(answers=["allow-once", "allow-always"])
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        sid = session.session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("edit a")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert target.read_text() == "a = 10\nb = 2\n"
        [asked] = editor.asked
        assert {o.kind for o in asked.options} == {
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        }
        # The editor knew the call before the question, and what it asks about: the
        # file and the change.
        [_, call] = editor.tool_calls()
        assert asked.tool_call.tool_call_id == call.tool_call_id
        assert call.kind == "edit"
        assert call.raw_input == {
            "file_path": "app.py",
            "old_string": "a = 1",
            "new_string": "a = 10",
        }
        path = str((dsh.project / "app.py").resolve())
        assert [loc.path for loc in asked.tool_call.locations or []] == [path]
        [diff] = [
            c for c in asked.tool_call.content or [] if isinstance(c, FileEditToolCallContent)
        ]
        assert (diff.path, diff.old_text, diff.new_text) == (path, "a = 1\nb = 2", "a = 10\nb = 2")
        # Once done, the diff the tool logged.
        done = editor.tool_updates(call.tool_call_id)[-1]
        assert done.status == "completed"
        [diff] = [c for c in done.content or [] if isinstance(c, FileEditToolCallContent)]
        assert (diff.old_text, diff.new_text) == ("a = 1\nb = 2", "a = 10\nb = 2")
        assert [loc.path for loc in done.locations or []] == [str(dsh.project / "app.py")]

        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("edit b")), TIMEOUT)
        assert target.read_text() == "a = 10\nb = 20\n"
        assert len(editor.asked) == 2  # allowed for the session this time

        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("again")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert target.read_text() == "a = 100\nb = 20\n"
        assert len(editor.asked) == 2  # the grant held: not asked again
    events = await dsh.checked_events(sid)
    outcomes = [e.data.outcome for e in events if e.type == "approval/resolved"]
    assert outcomes == ["allow-once", "allow-session", "allow-once"]


async def test_a_rejected_edit_leaves_the_file(dsh: Dsh, fake_llm: FakeLLM) -> None:
    target = dsh.project / "app.py"
    target.write_text("a = 1\n")
    fake_llm.add(
        read("app.py"),
        edit("app.py", "a = 1", "a = 2"),
        Reply(text="Not edited."),
        edit("app.py", "a = 1", "a = 2"),
        Reply(text="Still not."),
    )
    editor = Editor(answers=["reject-always"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("edit")), TIMEOUT)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("again")), TIMEOUT)
        assert len(editor.asked) == 1  # rejected for the session: not asked again
        [_, first, second] = editor.tool_calls()
        for call in (first, second):
            assert editor.tool_updates(call.tool_call_id)[-1].status == "failed"
    assert target.read_text() == "a = 1\n"
    denied = [
        m["content"] for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert "denied" in denied[-1]


async def test_a_command_shows_its_output(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="bash",
                    arguments=json.dumps(
                        {
                            "command": "echo made > out.txt; echo printed",
                            "description": "write a file",
                        }
                    ),
                )
            ]
        ),
        Reply(text="Ran it."),
    )
    editor = Editor(answers=["allow-once"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("run")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        [call] = editor.tool_calls()
        assert call.kind == "execute"
        assert call.title == "write a file"
        last = editor.tool_updates(call.tool_call_id)[-1]
        assert last.status == "completed"
        shown = "".join(c.content.text for c in last.content or [] if c.type == "content")
        assert "printed" in shown
        assert "echo made" in shown
    assert (dsh.project / "out.txt").read_text() == "made\n"


async def test_cancel_in_the_middle_of_a_reply(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="word " * 400, chunk_size=5, chunk_delay_ms=20))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("talk")))
        await editor.wait_for(lambda: editor.text())
        await conn.cancel(session_id=sid)
        reply = await asyncio.wait_for(prompt, TIMEOUT)
        assert reply.stop_reason == "cancelled"
        assert len(editor.text()) < len("word " * 400)
    events = await dsh.checked_events(sid)
    [end] = [e for e in events if e.type == "turn/end"]
    assert end.data.reason.kind == "aborted"


async def test_cancel_while_asking_answers_cancelled_and_runs_nothing(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    target = dsh.project / "app.py"
    target.write_text("a = 1\n")
    fake_llm.add(read("app.py"), edit("app.py", "a = 1", "a = 2"), Reply(text="never"))
    editor = Editor(answers=["hold"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("edit")))
        await editor.wait_for(lambda: editor.asked)
        await conn.cancel(session_id=sid)
        reply = await asyncio.wait_for(prompt, TIMEOUT)
        editor.release_cancelled()  # too late: the call was withdrawn already
        assert reply.stop_reason == "cancelled"
    assert target.read_text() == "a = 1\n"
    assert len(fake_llm.chat_requests) == 2  # nothing asked of the model after the cancel
    events = await dsh.checked_events(sid)
    [resolved] = [e for e in events if e.type == "approval/resolved"]
    assert resolved.data.outcome == "deny"


async def test_a_session_loads_in_a_new_process_with_its_history(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        Reply(reasoning="Thinking.", text="First answer."),
        Reply(text="Second answer."),
    )
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("first")), TIMEOUT)
    again = Editor()
    async with editor_session(dsh, again) as (conn, _):
        loaded = await asyncio.wait_for(
            conn.load_session(cwd=str(dsh.project), session_id=sid), TIMEOUT
        )
        assert loaded is not None
        assert loaded.modes is not None
        # Replayed before the answer: the person's words, the thoughts, the answer.
        assert again.said_by_user() == "first"
        assert again.thoughts() == "Thinking."
        assert again.text() == "First answer."
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("second")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert again.text() == "First answer.Second answer."
    # The second request carried the first exchange: the session went on.
    sent = json.dumps(fake_llm.chat_requests[-1].body["messages"])
    assert "First answer." in sent
    events = await dsh.checked_events(sid)
    assert [e.type for e in events].count("turn/end") == 2


async def test_modes_switch_and_read_only_denies_edits(dsh: Dsh, fake_llm: FakeLLM) -> None:
    target = dsh.project / "app.py"
    target.write_text("a = 1\n")
    fake_llm.add(read("app.py"), edit("app.py", "a = 1", "a = 2"), Reply(text="Could not."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        assert session.modes is not None
        offered = [m.id for m in session.modes.available_modes]
        assert offered == ["plan", "read-only", "default", "accept-edits"]
        await conn.set_session_mode(session_id=session.session_id, mode_id="read-only")
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("edit")), TIMEOUT
        )
        assert editor.asked == []
        # The editor's own choice is not echoed back (current_mode_update is how an
        # agent tells of a change it made).
        assert not [u for u in editor.updates if isinstance(u, CurrentModeUpdate)]
        with pytest.raises(RequestError) as refused:
            await conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        assert refused.value.code == -32602
        # Switched by a command, the editor is told.
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("/permissions accept-edits")),
            TIMEOUT,
        )
        said = [u.current_mode_id for u in editor.updates if isinstance(u, CurrentModeUpdate)]
        assert said == ["accept-edits"]
    assert target.read_text() == "a = 1\n"


async def test_the_todo_list_is_the_plan(dsh: Dsh, fake_llm: FakeLLM) -> None:
    todos = {
        "todos": [
            {"content": "write tests", "status": "in_progress"},
            {"content": "ship", "status": "pending"},
        ]
    }
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="todo_write", arguments=json.dumps(todos))]),
        Reply(text="Planned."),
    )
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("plan")), TIMEOUT)
        plans = [u for u in editor.updates if isinstance(u, AgentPlanUpdate)]
        assert plans, editor.updates
        assert [(e.content, e.status) for e in plans[-1].entries] == [
            ("write tests", "in_progress"),
            ("ship", "pending"),
        ]


async def test_a_session_started_in_the_editor_resumes_in_a_terminal(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Said in the editor."), Reply(text="Said in the terminal."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("first")), TIMEOUT)
    listing = Editor()
    async with editor_session(dsh, listing) as (conn, _):
        listed = await conn.list_sessions(cwd=str(dsh.project))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "first")]
        assert listed.next_cursor is None
        assert (await conn.list_sessions(cwd=str(dsh.root))).sessions == []
    done = await dsh.run("-p", "and now?", "--resume", sid)
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "Said in the terminal.\n"
    sent = json.dumps(fake_llm.chat_requests[-1].body["messages"])
    assert "Said in the editor." in sent
    assert await dsh.session_ids() == [sid]


async def test_context_from_the_editor_and_slash_commands(dsh: Dsh, fake_llm: FakeLLM) -> None:
    notes = dsh.project / "notes.txt"
    notes.write_text("saved notes on disk\n")
    fake_llm.add(Reply(text="Seen."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = [
            TextContentBlock(type="text", text="look at"),
            EmbeddedResourceContentBlock(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///work/notes.md",
                    text="unsaved buffer text",
                    mime_type="text/markdown",
                ),
            ),
            ResourceLinkBlock(type="resource_link", uri="https://example.com/spec", name="spec"),
            ResourceLinkBlock(type="resource_link", uri=notes.as_uri(), name="notes.txt"),
        ]
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        sent = json.dumps(fake_llm.chat_requests[-1].body["messages"])
        assert "unsaved buffer text" in sent
        assert "file:///work/notes.md" in sent
        assert "https://example.com/spec" in sent
        assert "saved notes on disk" in sent  # a file of the project is attached
        # A slash command runs in dsh, and what it says is the answer; no model call.
        before = editor.text()
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/cost")), TIMEOUT)
        assert reply.stop_reason == "end_turn"
        assert editor.text() != before
        assert len(fake_llm.chat_requests) == 1


def ask(*questions: dict[str, object]) -> Reply:
    arguments = json.dumps({"questions": list(questions)})
    return Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=arguments)])


async def test_questions_are_asked_as_a_choice_or_declined(dsh: Dsh, fake_llm: FakeLLM) -> None:
    colour = {
        "id": "colour",
        "question": "Which colour?",
        "options": [{"label": "Red"}, {"label": "Blue", "description": "the calm one"}],
    }
    free = {"id": "name", "question": "What name?"}
    fake_llm.add(ask(colour), Reply(text="Blue it is."), ask(colour, free), Reply(text="I ask."))
    editor = Editor(answers=["1"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("pick")), TIMEOUT)
        [asked] = editor.asked
        assert asked.tool_call.title == "Which colour?"
        assert [o.name for o in asked.options] == ["Red", "Blue: the calm one"]
        [call] = editor.tool_calls()
        assert asked.tool_call.tool_call_id == call.tool_call_id  # shown on the asking call
        answered = [
            m["content"] for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "tool"
        ]
        assert json.loads(answered[-1]) == {"answers": [{"id": "colour", "selected": ["Blue"]}]}
        # Two questions, one of them free text: not a choice the editor can show.
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("more")), TIMEOUT)
        assert len(editor.asked) == 1
    declined = [
        m["content"] for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    assert "ask it in your reply" in declined[-1]


async def test_the_model_is_chosen_in_the_editor(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Answered."))
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        [model] = session.config_options or []
        assert model.category == "model"
        assert model.current_value == "deepseek-flash"
        chosen = await conn.set_config_option(
            config_id="model", session_id=session.session_id, value="deepseek-v4-pro"
        )
        assert chosen.config_options[0].current_value == "deepseek-v4-pro"
        with pytest.raises(RequestError):
            await conn.set_config_option(
                config_id="colour", session_id=session.session_id, value="red"
            )
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("hi")), TIMEOUT
        )
    assert fake_llm.chat_requests[-1].body["model"] == "deepseek-v4-pro"


async def test_commands_added_meanwhile_are_announced(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Hi."))
    editor = Editor()

    def announced() -> list[set[str]]:
        return [
            {c.name for c in u.available_commands}
            for u in editor.updates
            if isinstance(u, AvailableCommandsUpdate)
        ]

    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        [first] = await editor.wait_for(announced)
        assert "hello" not in first
        (dsh.home / "commands").mkdir()
        (dsh.home / "commands" / "hello.md").write_text("Say hello to $ARGUMENTS.\n")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("hi")), TIMEOUT)

        async def until_announced() -> None:
            # The files are looked for again beside a turn; each prompt's end says
            # what changed.
            while "hello" not in announced()[-1]:
                await conn.prompt(session_id=sid, prompt=text("/cost"))

        await asyncio.wait_for(until_announced(), TIMEOUT)
        assert len(announced()) == 2  # said again only when it changed


async def test_a_custom_command_runs_with_its_arguments_mention_and_asked_bang_line(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    (dsh.project / "api.py").write_text("def handler(): return 42\n")
    marker = dsh.project / "ran"  # where the sandbox lets a ! line write
    (dsh.home / "commands").mkdir()
    (dsh.home / "commands" / "review.md").write_text(
        "---\ndescription: Review a file for one concern\nargument-hint: FILE CONCERN\n---\n"
        f"Review $1 for $2.\n\nThe file: @$1\n\n!touch {marker} && echo marked\n"
    )
    fake_llm.add(Reply(text="Reviewed without it."), Reply(text="Reviewed."))
    editor = Editor(answers=["reject-once", "allow-once"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id

        def review() -> list[object]:
            return [
                c
                for u in editor.updates
                if isinstance(u, AvailableCommandsUpdate)
                for c in u.available_commands
                if c.name == "review"
            ]

        [listed] = await editor.wait_for(review)
        assert listed.description == "Review a file for one concern (user)"
        assert listed.input is not None
        assert listed.input.root.hint == "FILE CONCERN"

        # Rejected in the editor: the ! line does not run, the prompt says so.
        line = "/review api.py 'error handling'"
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text(line)), TIMEOUT)
        assert not marker.exists()
        [asked] = editor.asked
        # Not a call of the model's: the request itself says what would run.
        assert asked.tool_call.title == f"touch {marker} && echo marked"
        assert asked.tool_call.status == "pending"
        # The prompt returned once the command's turn had ended, its answer sent.
        assert reply.stop_reason == "end_turn"
        assert reply.usage is not None
        assert editor.text().endswith("Reviewed without it.")
        sent = json.dumps(fake_llm.chat_requests[0].body["messages"])
        assert "Review api.py for error handling." in sent
        assert "def handler(): return 42" in sent  # the @ mention attached the file
        assert "(not run:" in sent

        # Allowed in the editor: it runs, and its output is in the prompt.
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text(line)), TIMEOUT)
        assert marker.exists()
        assert len(editor.asked) == 2
        assert reply.stop_reason == "end_turn"
        assert editor.text().endswith("Reviewed.")
        users = [m for m in fake_llm.chat_requests[1].body["messages"] if m["role"] == "user"]
        assert f"$ touch {marker} && echo marked\\nmarked" in json.dumps(users[-2:])
    events = await dsh.checked_events(sid)
    assert [e.type for e in events].count("turn/end") == 2


async def test_cancel_while_a_command_line_is_asked_runs_nothing_and_sends_nothing(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    marker = dsh.root / "ran"
    (dsh.home / "commands").mkdir()
    (dsh.home / "commands" / "mark.md").write_text(f"Say what this did:\n!touch {marker}\n")
    fake_llm.add(Reply(text="never"))
    editor = Editor(answers=["hold"])
    async with editor_session(dsh, editor) as (conn, _):
        sid = (await conn.new_session(cwd=str(dsh.project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("/mark")))
        await editor.wait_for(lambda: editor.asked)
        await conn.cancel(session_id=sid)
        editor.release_cancelled()
        reply = await asyncio.wait_for(prompt, TIMEOUT)
        assert reply.stop_reason == "cancelled"
    assert not marker.exists()
    assert fake_llm.chat_requests == []  # the command's prompt did not go out either


async def test_exit_typed_in_an_editor_says_how_to_end_the_session(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    editor = Editor()
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("/exit")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
        assert "close the session in the editor" in editor.text()
    assert fake_llm.chat_requests == []  # not sent to the model either
