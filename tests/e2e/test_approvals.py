"""Approvals and questions end to end through ``dsh -p`` against the scripted server."""

from __future__ import annotations

from typing import Any

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, close_stdin, finish, send, stream_events


def tool_messages(server: FakeLLM, request: int = -1) -> list[str]:
    return [
        m["content"] for m in server.chat_requests[request].body["messages"] if m["role"] == "tool"
    ]


def shout(text: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": text})])


async def test_headless_denial_reaches_the_model(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(shout("hello"))
    fake_llm.add(Reply(text="I was not allowed to shout."))
    done = await dsh.run("-p", "shout hello")
    assert done.code == 0, done.stderr
    [denied] = tool_messages(fake_llm)
    assert denied.startswith("Error: shout was not run: no one is here to approve it (headless)")
    events = await dsh.checked_events()
    [resolved] = [e for e in events if e.type == "approval/resolved"]
    assert (resolved.data.outcome, resolved.data.by) == ("deny", "headless")


async def test_permission_mode_bypass_runs_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(shout("hello"))
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "shout hello", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr
    assert tool_messages(fake_llm) == ["HELLO"]
    await dsh.checked_events()


async def test_a_denial_with_a_reason_reaches_the_model(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(shout("hello"))
    fake_llm.add(Reply(text="Understood, I will whisper."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "shout hello"})
    request: dict[str, Any] | None = None
    async for line in stream_events(child):
        if line.get("type") == "approval-request":
            request = line
            break
    assert request is not None
    assert (request["toolName"], request["summary"], request["risk"]) == (
        "shout",
        "shout hello",
        "exec",
    )
    await send(
        child,
        {
            "type": "approval",
            "request_id": request["requestId"],  # the key's old spelling is read too
            "outcome": "deny",
            "feedback": "it is late, whisper",
        },
    )
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    assert tool_messages(fake_llm) == ["Error: the user denied shout: it is late, whisper"]
    events = await dsh.checked_events()
    [resolved] = [e for e in events if e.type == "approval/resolved"]
    assert (resolved.data.outcome, resolved.data.by, resolved.data.reason) == (
        "deny",
        "user",
        "it is late, whisper",
    )


async def test_allow_for_the_session_is_asked_once(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(shout("one"))
    fake_llm.add(shout("two"))
    fake_llm.add(Reply(text="Both shouted."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "shout twice"})
    asked = 0
    async for line in stream_events(child):
        if line.get("type") == "approval-request":
            asked += 1
            await send(
                child,
                {"type": "approval", "requestId": line["requestId"], "outcome": "allow_session"},
            )
        if line.get("type") == "turn/end":
            break
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    assert asked == 1
    assert [tool_messages(fake_llm, 1), tool_messages(fake_llm, 2)[-1:]] == [["ONE"], ["TWO"]]
    await dsh.checked_events()


async def test_a_question_is_answered_over_stdin(dsh: Dsh, fake_llm: FakeLLM) -> None:
    question = {
        "questions": [
            {
                "id": "lang",
                "question": "Which language?",
                "options": [{"label": "Python"}, {"label": "Rust"}],
            }
        ]
    }
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    fake_llm.add(Reply(text="Rust it is."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "start a project"})
    async for line in stream_events(child):
        if line.get("type") == "question-request":
            assert line["questions"][0]["question"] == "Which language?"
            answer = {"id": "lang", "selected": ["Rust"]}
            await send(
                child, {"type": "answer", "requestId": line["requestId"], "answers": [answer]}
            )
            break
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    assert tool_messages(fake_llm) == ['{"answers": [{"id": "lang", "selected": ["Rust"]}]}']
    await dsh.checked_events()


async def test_headless_questions_tell_the_model_no_one_is_there(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    question = {"questions": [{"id": "x", "question": "Tabs or spaces?"}]}
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="ask_user_question", arguments=question)]))
    fake_llm.add(Reply(text="Spaces, then."))
    done = await dsh.run("-p", "format it")
    assert done.code == 0, done.stderr
    [refused] = tool_messages(fake_llm)
    assert refused.startswith("Error: no user is available to answer questions (dsh runs headless)")
    await dsh.checked_events()


async def test_an_approval_asked_after_stdin_closed_is_denied_not_waited_for(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    # The driver sends its prompt and closes stdin; the call needing approval comes
    # later (the reply is slow). Nobody can answer it: denied, and dsh ends (it used
    # to wait for ever on an answer that could not come).
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "x"})], chunk_delay_ms=200),
        Reply(text="Not shouted."),
    )
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "shout"})
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    [denied] = tool_messages(fake_llm)
    assert denied == "Error: shout was not run: the approval was unavailable"
    await dsh.checked_events()
