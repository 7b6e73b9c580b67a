"""Provider faults in the middle of tool conversations, through ``dsh -p`` end to end.

A fault the model server can recover from (429, 500, a connection cut before any
event, a first byte slower than the read timeout) is retried with the very same body
and the turn goes on to its answer. A fault after part of the answer was shown (a
stream cut mid-answer or mid tool call, a malformed event) ends the turn with one
clear line and exit status 1, keeps what was shown, and the session resumes to a
correct end. Every request must be rebuildable from the log alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh.agent.interruption import MAX_CONTINUATIONS
from dsh.replay.compare import Report, compare
from dsh.replay.recorded import read_recording
from dsh.replay.run import ReplayOptions, replay
from dsh.session import AssistantMessageData, SessionStore
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, of_type, text_of, user_texts
from tests.support.vocabulary import async_plugin_vocabulary

SETTINGS = """\
[plugins]
modules = ["tests.support.echo_tool"]

[plugins.llm-deepseek]
read_timeout = 1.0

[plugins.llm-deepseek.retry]
base_delay_ms = 20
max_delay_ms = 100
max_retries = 3
"""


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    (dsh.home / "settings.toml").write_text(SETTINGS)
    return dsh


def echo(text: str) -> ToolCallSpec:
    return ToolCallSpec(name="echo", arguments={"text": text})


def bodies(server: FakeLLM) -> list[dict[str, Any]]:
    return [r.body for r in server.chat_requests]


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


async def test_recoverable_faults_mid_conversation_are_retried_and_the_turn_completes(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        Reply(reasoning="First a.", tool_calls=[echo("a")]),
        Reply(fault=Fault(status=429, retry_after=0.05)),  # rate limited
        Reply(tool_calls=[echo("b")]),
        Reply(fault=Fault(status=500)),  # a server error
        Reply(text="never seen", cut_after=0),  # headers, then the connection drops
        Reply(text="never seen", first_byte_delay_ms=2500),  # beyond the 1 s read timeout
        Reply(tool_calls=[echo("c")]),
        Reply(text="All three came back.", first_byte_delay_ms=400, keepalive=True),
    )

    done = await dsh.run("-p", "echo a, b and c")

    assert done.code == 0, done.stderr
    assert done.stdout == "All three came back.\n"
    events = await dsh.checked_events()  # the log is sound and rebuilds every request
    retries = [e.data for e in of_type(events, "llm/retry")]
    assert [r.failure.code for r in retries] == ["RATE_LIMIT", "SERVER", "TRANSPORT", "TIMEOUT"]
    assert [r.retry for r in retries] == [1, 1, 2, 3]
    sent = bodies(fake_llm)
    assert len(sent) == 8
    assert sent[1] == sent[2]  # a retry sends the same body
    assert sent[3] == sent[4] == sent[5] == sent[6]
    assert tool_outputs(sent[7]) == ["echo: a", "echo: b", "echo: c"]
    # Failed attempts left nothing in history: one answer per step.
    answers = [e.data for e in of_type(events, "assistant/message")]
    assert len(answers) == 4
    assert not any(isinstance(a, AssistantMessageData) and a.interrupted for a in answers)


async def test_a_stream_that_closes_before_any_content_is_retried(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """Only the role chunk then the end of the stream, or a malformed first event: the
    user saw nothing, so it is retried like a failed connection (it ended the turn with
    STREAM_CLOSED before)."""
    fake_llm.add(
        Reply(tool_calls=[echo("a")]),
        Reply(text="never seen", cut_after=1),  # the role chunk, then the stream ends
        Reply(text="never seen", malformed_at=0),
        Reply(text="Back after two retries."),
    )

    done = await dsh.run("-p", "echo a")

    assert done.code == 0, done.stderr
    assert done.stdout == "Back after two retries.\n"
    events = await dsh.checked_events()
    retries = [e.data for e in of_type(events, "llm/retry")]
    assert [r.failure.code for r in retries] == ["STREAM_CLOSED", "MALFORMED_RESPONSE"]
    sent = bodies(fake_llm)
    assert sent[1] == sent[2] == sent[3]  # the same request, as for any retry
    answers = [e.data for e in of_type(events, "assistant/message")]
    assert not any(isinstance(a, AssistantMessageData) and a.interrupted for a in answers)


async def test_a_replay_that_retries_less_names_the_request_and_the_attempts(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """The recorded session's request was retried twice; replayed by a dsh that
    retries once at most, the report names that request's attempts first (each failed
    attempt is served as recorded, so the replaying dsh gives up on the second)."""
    fake_llm.add(
        Reply(tool_calls=[echo("a")]),
        Reply(fault=Fault(status=500)),
        Reply(fault=Fault(status=503)),
        Reply(text="Back after two retries."),
    )
    done = await dsh.run("-p", "echo a")
    assert done.code == 0, done.stderr
    await dsh.checked_events()  # replayed with the settings it ran with: identical

    [session_id] = await dsh.session_ids()
    stricter = SETTINGS.replace("max_retries = 3", "max_retries = 1")
    report = await replay_report(dsh, session_id, stricter)
    assert not report.identical
    first = report.first
    assert first is not None
    assert (first.where, first.what) == ("request 2 (turn 1, step 2)", "attempts retried")
    assert (first.recorded, first.now) == ("2", "1")


async def replay_report(dsh: Dsh, session_id: str, settings: str) -> Report:
    store = SessionStore.at(dsh.home, dsh.backend)
    try:
        async with async_plugin_vocabulary():
            loaded = await store.persistence.load(session_id)  # type: ignore[arg-type]
            recording = read_recording(loaded.header, loaded.events)
            run = await replay(recording, ReplayOptions(settings=settings))
    finally:
        await store.aclose()
    return compare(run)


async def test_retries_that_run_out_end_the_turn_with_one_line(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(tool_calls=[echo("a")]), *(Reply(fault=Fault(status=503)) for _ in range(4)))

    done = await dsh.run("-p", "echo a")

    assert done.code == 1
    [line] = done.stderr.splitlines()[-1:]
    assert line.startswith("dsh: deepseek server error (503)"), done.stderr
    events = await dsh.checked_events()
    assert of_type(events, "turn/end")[-1].data.reason.kind == "error"
    assert len(of_type(events, "llm/retry")) == 3
    assert fake_llm.remaining == 0


CUT_TEXT = "The first part of the answer is here and then the line goes dead"


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            Reply(reasoning="Thinking.", text=CUT_TEXT, chunk_size=8, cut_after=6),
            "the connection to deepseek broke",
        ),
        (
            Reply(text=CUT_TEXT, chunk_size=8, malformed_at=4),
            "malformed response from the model server",
        ),
        (
            # Cut while a tool call's arguments stream: the half call must not run or
            # enter history.
            Reply(text="Calling.", tool_calls=[echo("x" * 200)], chunk_size=8, cut_after=8),
            "the connection to deepseek broke",
        ),
    ],
    ids=["cut-mid-answer", "malformed-event", "cut-mid-tool-call"],
)
async def test_a_broken_stream_mid_conversation_fails_cleanly_and_resumes(
    dsh: Dsh, fake_llm: FakeLLM, fault: Reply, message: str
) -> None:
    # A dropped connection after content is continued twice in a turn (each time the
    # partial answer stays and a note asks the model to go on); the third ends it.
    # A malformed stream is the server's fault, not the line's: never continued.
    cut = "broke" in message
    times = 1 + MAX_CONTINUATIONS if cut else 1
    fake_llm.add(Reply(tool_calls=[echo("a")]), *([fault] * times))

    done = await dsh.run("-p", "echo a, then explain")

    assert done.code == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("dsh: "), done.stderr
    assert message in last, done.stderr
    [session_id] = await dsh.session_ids()
    events = await dsh.checked_events()
    assert of_type(events, "turn/end")[-1].data.reason.kind == "error"
    assert len(of_type(events, "tool/call")) == 1  # only echo a ran
    partial = [e.data for e in of_type(events, "assistant/message")][-1]
    assert isinstance(partial, AssistantMessageData)
    assert partial.interrupted
    assert partial.message.tool_calls == ()
    kept = partial.message.text()
    assert kept
    assert fault.text.startswith(kept)
    partials = [e.data for e in of_type(events, "assistant/message") if e.data.interrupted]
    assert len(partials) == times
    notes = [e.data.text() for e in of_type(events, "user/message")]
    continued = [n for n in notes if "Continue from exactly that point" in n]
    assert len(continued) == times - 1
    if cut:  # each continuation carried what arrived, then the note
        for body in bodies(fake_llm)[2 : 1 + times]:
            last_two = body["messages"][-2:]
            assert [m["role"] for m in last_two] == ["assistant", "user"]
            assert kept in text_of(last_two[0])

    fake_llm.add(Reply(tool_calls=[echo("b")]), Reply(text="Explained."))
    again = await dsh.run("-p", "go on", "--resume", session_id)

    assert again.code == 0, again.stderr
    assert again.stdout == "Explained.\n"
    events = await dsh.checked_events(session_id)
    assert [e.data.reason.kind for e in of_type(events, "turn/end")] == ["error", "completed"]
    resumed = bodies(fake_llm)[1 + times]
    assistant = [text_of(m) for m in resumed["messages"] if m["role"] == "assistant"]
    assert kept in assistant  # the model reads what the user saw
    assert user_texts(resumed)[-1] == "go on"
    assert tool_outputs(bodies(fake_llm)[-1]) == ["echo: a", "echo: b"]


async def test_text_with_unicode_line_separators_arrives_whole(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # DeepSeek sends non-ASCII raw (UTF-8), so these reach the wire unescaped; SSE ends
    # lines only at CR and LF, while str.splitlines also cuts at each of these.
    text = "one\u2028two\x85three\u2029four\x0bfive\x0csix\x1cseven\x1d\x1eend"
    fake_llm.add(
        Reply(reasoning="Mind the\u2028gap.", tool_calls=[echo("a\u2028b")], chunk_size=3),
        Reply(text=text, chunk_size=3),
    )

    done = await dsh.run("-p", "say it")

    assert done.code == 0, done.stderr
    assert done.stdout == text + "\n"
    events = await dsh.checked_events()
    assert tool_outputs(bodies(fake_llm)[1]) == ["echo: a\u2028b"]
    assert of_type(events, "turn/end")[-1].data.reason.kind == "completed"
