"""The model stream over a long day, through ``dsh -p`` end to end (issue 34).

A process must not wear out its connections: every request's connection is released
(read to its end and reused, or closed) before the answer is handed on, so request
101 and request 10,000 go like the first. A server that stalls or lies must cost a
bounded wait that the person is told about: headers and then nothing is a timeout
retried with a line on stderr each time; an answer whose ``finish_reason`` came but
whose stream never ended is complete, not interrupted; a 200 that is not an event
stream (an HTML page, a JSON body) is said for what it is and not retried.
"""

from __future__ import annotations

import pytest

from dsh.session import AssistantMessageData
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, of_type

RETRIES = """
[plugins.llm-deepseek.retry]
base_delay_ms = 20
max_delay_ms = 100
max_retries = 2
"""


def settings(dsh: Dsh, deepseek: str) -> None:
    (dsh.home / "settings.toml").write_text(
        '[plugins]\nmodules = ["tests.support.echo_tool"]\n\n'
        f"[plugins.llm-deepseek]\n{deepseek}\n{RETRIES}"
    )


def echo(text: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": text})])


def answers(events: list[object]) -> list[AssistantMessageData]:
    return [e.data for e in of_type(events, "assistant/message")]  # type: ignore[arg-type]


async def test_a_process_keeps_going_past_its_hundred_and_first_request(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """Every streamed request left its connection checked out of httpx's pool of 100:
    request 101 waited for a free one until it timed out, and so did every later one.
    Now each is released before the answer is handed on, and reused."""
    settings(dsh, "read_timeout = 5")
    steps = 110
    fake_llm.add(*(echo(f"n{n}") for n in range(steps)), Reply(text="All done."))

    done = await dsh.run("-p", "go", "--max-steps", str(steps + 10), "--permission-mode", "bypass")

    assert done.code == 0, done.stderr[-2000:]
    assert done.stdout == "All done.\n"
    requests = fake_llm.chat_requests
    assert len(requests) == steps + 1
    assert all(r.status == 200 and r.finished_at is not None for r in requests)
    events = await dsh.checked_events()
    assert of_type(events, "llm/retry") == []
    # Read to their end, the connections go back to the pool and carry the next
    # request: a handful for 111 requests, not one each.
    connections = {r.connection for r in requests}
    assert len(connections) < 20, f"{len(connections)} connections for {len(requests)} requests"


async def test_headers_then_nothing_is_a_timeout_said_at_each_retry(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """The server answers 200 and then sends nothing: each attempt ends at the wait's
    bound, and each retry is said on stderr (text mode said nothing for 30 minutes)."""
    settings(dsh, "read_timeout = 1")
    fake_llm.add(*(Reply(text="never", hold_after=0) for _ in range(3)))

    done = await dsh.run("-p", "hello")

    assert done.code == 1
    lines = done.stderr.splitlines()
    retries = [line for line in lines if "retry" in line]
    assert len(retries) == 2, done.stderr
    assert "retry 1 of 2" in retries[0]
    assert "retry 2 of 2" in retries[1]
    assert all(line.startswith("dsh: deepseek sent nothing for 1 s") for line in retries)
    assert "sent nothing for 1 s" in retries[0], done.stderr
    assert lines[-1].startswith("dsh: deepseek sent nothing for 1 s"), done.stderr
    assert len(fake_llm.chat_requests) == 3
    events = await dsh.checked_events()
    assert [e.data.failure.code for e in of_type(events, "llm/retry")] == ["TIMEOUT"] * 2


async def test_the_new_wait_settings_bound_the_headers_and_the_silence(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """``headers_timeout`` bounds the wait for the response headers, and
    ``stream_idle_timeout`` a silence after them, which keep-alive comments break:
    a request that waits to be scheduled longer than the idle bound, with DeepSeek's
    keep-alives meanwhile, is not cut off."""
    settings(dsh, "headers_timeout = 1\nstream_idle_timeout = 1")
    fake_llm.add(
        Reply(text="never", first_byte_delay_ms=3000),  # no headers within 1 s
        Reply(text="never", hold_after=1),  # the role chunk, then silence
        Reply(text="Waited my turn.", first_event_delay_ms=2500, keepalive_interval_ms=200),
    )

    done = await dsh.run("-p", "hello", "--output-format", "json")

    assert done.code == 0, done.stderr
    retries = [line for line in done.stderr.splitlines() if "retry" in line]
    assert len(retries) == 2, done.stderr
    assert "did not answer within 1 s" in retries[0]
    assert "sent nothing for 1 s" in retries[1]
    events = await dsh.checked_events()
    assert [e.data.failure.code for e in of_type(events, "llm/retry")] == ["TIMEOUT"] * 2
    [answer] = answers(events)
    assert answer.message.text() == "Waited my turn."
    assert not answer.interrupted


@pytest.mark.parametrize(
    "keepalive_ms", [None, 100.0], ids=["then-silence", "then-keep-alives-only"]
)
async def test_a_finish_reason_then_silence_is_a_complete_answer(
    dsh: Dsh, fake_llm: FakeLLM, keepalive_ms: float | None
) -> None:
    """The final chunk (``finish_reason`` and usage) comes, ``[DONE]`` never does and
    the connection stays open: the answer is complete after a short grace, which
    keep-alive comments do not extend (it waited the read timeout, exited 1 and
    marked the whole answer interrupted)."""
    settings(dsh, "read_timeout = 30")
    # Events: 0 the role chunk, 1 the text, 2 the final chunk, 3 [DONE].
    fake_llm.add(
        echo("a"),
        Reply(
            text="The whole answer.",
            chunk_size=100,
            hold_after=3,
            keepalive_interval_ms=keepalive_ms,
        ),
    )

    done = await dsh.run("-p", "echo a, then answer")

    assert done.code == 0, done.stderr
    assert done.stdout == "The whole answer.\n"
    events = await dsh.checked_events()
    last = answers(events)[-1]
    assert last.message.text() == "The whole answer."
    assert not last.interrupted
    assert last.usage is not None
    assert last.usage.output_tokens > 0
    assert of_type(events, "turn/end")[-1].data.reason.kind == "completed"
    assert of_type(events, "llm/retry") == []


async def test_done_then_a_body_that_never_ends_does_not_hold_the_answer(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """``[DONE]`` came but the body never ends: the connection is closed after a short
    grace instead of being waited on, and the next request goes on a new one."""
    settings(dsh, "read_timeout = 30")
    # Events: 0 the role chunk, 1 the call's name, 2 its arguments, 3 the final
    # chunk, 4 [DONE]: all five are sent, and then the body is held open.
    call = ToolCallSpec(name="echo", arguments={"text": "a"})
    fake_llm.add(Reply(tool_calls=[call], chunk_size=100, hold_after=5), Reply(text="Next."))

    done = await dsh.run("-p", "echo a")

    assert done.code == 0, done.stderr
    assert done.stdout == "Next.\n"
    first, second = fake_llm.chat_requests
    assert first.disconnected_at is not None  # closed by dsh, not waited on
    assert second.connection != first.connection


HTML = (
    "<!DOCTYPE html>\n<html>\n  <head><title>Sign in \x1b[31mto the gateway</title></head>\n"
    "  <body>" + "<p>Please sign in.</p>" * 200 + "</body>\n</html>\n"
)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (
            Fault(status=200, body=HTML, headers={"Content-Type": "text/html; charset=utf-8"}),
            ["text/html", "<!DOCTYPE html> <html> <head><title>Sign in"],
        ),
        (
            Fault(status=200, body={"error": {"message": "Model overloaded", "code": "busy"}}),
            ["application/json", "Model overloaded"],
        ),
        (
            Fault(status=200, body="upstream connect error", headers={}),
            ["text/plain", "upstream connect error"],
        ),
    ],
    ids=["html-page", "json-body", "plain-text"],
)
async def test_a_200_that_is_not_an_event_stream_says_what_came_back(
    dsh: Dsh, fake_llm: FakeLLM, fault: Fault, said: list[str]
) -> None:
    settings(dsh, "read_timeout = 5")
    fake_llm.add(Reply(fault=fault), Reply(text="never asked"))

    done = await dsh.run("-p", "hello")

    assert done.code == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("dsh: deepseek answered 200 with "), done.stderr
    assert "not an event stream" in last, done.stderr
    for text in said:
        assert text in last, done.stderr
    assert "\x1b" not in done.stderr
    assert len(last) < 600  # the start of the body, not all of it
    assert len(fake_llm.chat_requests) == 1  # not retried: it would come back the same
    events = await dsh.checked_events()
    assert of_type(events, "turn/end")[-1].data.reason.kind == "error"
