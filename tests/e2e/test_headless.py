"""``dsh -p`` end to end: a real child process, the scripted server, the stored log.

Each test runs ``python -m dsh`` against the ``fake_llm`` server of the test, with a
fresh ``$DSH_HOME`` that loads the ``echo`` test tool. After each run the stored
session must be sound (``check_log``), and every request the server received must be
rebuildable from the log alone (``check_requests``).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from dsh.llm import Finish
from dsh.session import AssistantChunk, AssistantMessageData, SessionEvent, TurnEnd, check_log
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec, Usage
from dsh_plugins.llm_deepseek import FLASH_PRICE
from tests.e2e.harness import (
    TIMEOUT,
    Dsh,
    close_stdin,
    finish,
    interrupt,
    of_type,
    read_until,
    send,
    stream_events,
    text_of,
    user_texts,
)
from tests.support.waits import HANG_S


def echo(text: str, delay: float = 0.0) -> ToolCallSpec:
    arguments: dict[str, Any] = {"text": text}
    if delay:
        arguments["delay"] = delay
    return ToolCallSpec(name="echo", arguments=arguments)


def turn_ends(events: list[SessionEvent]) -> list[TurnEnd]:
    return [e.data for e in events if isinstance(e.data, TurnEnd)]


def bodies(server: FakeLLM) -> list[dict[str, Any]]:
    return [r.body for r in server.chat_requests]


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


async def test_a_tool_conversation_runs_to_its_answer(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(reasoning="Echo first.", tool_calls=[echo("one")]),
        Reply(reasoning="Echo again.", tool_calls=[echo("two")]),
        Reply(text="Both echoes came back."),
    )

    done = await dsh.run("-p", "echo twice, then tell me")

    assert done.code == 0, done.stderr
    assert done.stdout == "Both echoes came back.\n"
    assert '[tool] echo {"text": "one"}' in done.stderr
    assert '[tool] echo {"text": "two"}' in done.stderr
    events = await dsh.checked_events()
    assert [e.data.trigger.kind for e in of_type(events, "turn/start")] == ["prompt"]
    assert [end.reason.kind for end in turn_ends(events)] == ["completed"]
    assert len(of_type(events, "step/start")) == 3
    sent = bodies(fake_llm)
    assert len(sent) == 3
    assert tool_outputs(sent[1]) == ["echo: one"]
    assert tool_outputs(sent[2]) == ["echo: one", "echo: two"]


async def test_steering_joins_the_running_turn(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[echo("slowly", delay=1.0)]),
        Reply(text="Echoed, and X."),
    )
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "echo slowly"})
    seen = []
    async for event in stream_events(child):
        seen.append(event)
        if event["type"] == "tool/call":
            # The tool sleeps for a second: this arrives while it runs.
            await send(child, {"type": "steer", "text": "also mention X"})
            await close_stdin(child)
            break
    done = await finish(child, stdin=None)

    assert done.code == 0, done.stderr
    events = await dsh.checked_events()
    assert len(turn_ends(events)) == 1
    [steering] = of_type(events, "steering/message")
    assert steering.data.text() == "also mention X"
    [tool_result] = of_type(events, "tool/result")
    [_, second_step] = of_type(events, "step/start")
    assert tool_result.seq < second_step.seq < steering.seq  # entered at the next step
    [end] = of_type(events, "turn/end")
    assert steering.seq < end.seq  # the same turn
    first, second = bodies(fake_llm)
    assert "also mention X" not in user_texts(first)
    assert user_texts(second)[-1] == "also mention X"
    assert tool_outputs(second) == ["echo: slowly"]


async def test_a_followup_queued_while_running_gets_the_next_turn(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        Reply(text="First answer.", chunk_delay_ms=5),
        Reply(text="Second answer."),
    )
    child = await dsh.start("-p", "--input-format", "stream-json")
    await send(
        child,
        {"type": "prompt", "text": "first question"},
        {"type": "followup", "text": "second question"},
    )
    await close_stdin(child)
    done = await finish(child, stdin=None)

    assert done.code == 0, done.stderr
    assert done.stdout == "First answer.\nSecond answer.\n"
    events = await dsh.checked_events()
    assert [end.reason.kind for end in turn_ends(events)] == ["completed", "completed"]
    prompts = [(e.data.text(), e.seq) for e in of_type(events, "user/message")]
    turn_starts = [e.seq for e in of_type(events, "turn/start")]
    assert [text for text, _ in prompts if "question" in text] == [
        "first question",
        "second question",
    ]
    second_prompt_seq = next(seq for text, seq in prompts if text == "second question")
    assert second_prompt_seq > turn_starts[1]
    first, second = bodies(fake_llm)
    assert user_texts(first)[-1] == "first question"
    assert "second question" not in user_texts(first)
    assert user_texts(second)[-1] == "second question"


async def test_cancel_mid_stream_keeps_what_was_shown_and_resumes(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    story = " ".join(f"word{i}" for i in range(120))  # 150 chunks at 10 ms: 1.5 s whole
    fake_llm.add(Reply(text=story, chunk_size=4, chunk_delay_ms=10))
    child = await dsh.start("-p", "tell me a long story")
    shown = await read_until(child, 12)  # the text has reached the user
    interrupt(child)
    done = await finish(child)

    assert done.code == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "dsh: cancelled"
    [session_id] = await dsh.session_ids()
    events = await dsh.checked_events()
    assert turn_ends(events)[-1].reason.kind == "aborted"
    [message] = of_type(events, "assistant/message")
    assert isinstance(message.data, AssistantMessageData)
    assert message.data.interrupted
    partial = message.data.message.text()
    assert 12 <= len(partial) < len(story)
    assert story.startswith(partial)
    assert (shown.decode() + done.stdout).rstrip("\n") == partial  # exactly what was shown

    fake_llm.add(Reply(text="Going on."))
    again = await dsh.run("-p", "go on", "--resume", session_id)

    assert again.code == 0, again.stderr
    assert again.stdout == "Going on.\n"
    events = await dsh.checked_events(session_id)
    assert [end.reason.kind for end in turn_ends(events)] == ["aborted", "completed"]
    resumed = bodies(fake_llm)[-1]
    assistant = [text_of(m) for m in resumed["messages"] if m["role"] == "assistant"]
    assert assistant == [partial]
    assert user_texts(resumed)[-1] == "go on"


async def test_a_request_error_is_retried_with_the_same_body(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(fault=Fault(status=503, retry_after=0.05)), Reply(text="Made it."))

    done = await dsh.run("-p", "hello")

    assert done.code == 0, done.stderr
    assert done.stdout == "Made it.\n"
    # Said to the person as it happens: a wait with nothing on screen looks like a hang.
    [said] = done.stderr.splitlines()
    assert said.startswith("dsh: deepseek server error (503): Server Overloaded - retry 1 of 5")
    events = await dsh.checked_events()
    [retry] = of_type(events, "llm/retry")
    assert retry.data.retry == 1
    assert len(of_type(events, "request/header")) == 1
    first, second = bodies(fake_llm)
    assert first == second
    assert [r.status for r in fake_llm.chat_requests] == [503, 200]


async def test_max_steps_ends_the_turn(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(*(Reply(tool_calls=[echo(f"call {n}")]) for n in range(3)))

    done = await dsh.run("-p", "keep calling", "--max-steps", "2")

    assert done.code == 1
    assert "stopped after 2 steps" in done.stderr
    events = await dsh.checked_events()
    [end] = turn_ends(events)
    assert end.reason.kind == "max-steps"
    assert len(of_type(events, "step/start")) == 2
    assert len(of_type(events, "tool/result")) == 2
    assert len(fake_llm.chat_requests) == 2
    assert fake_llm.remaining == 1


async def test_json_output_is_one_result_object(dsh: Dsh, fake_llm: FakeLLM) -> None:
    usage = Usage(prompt_tokens=1_000, completion_tokens=50, cache_hit_tokens=400)
    fake_llm.add(Reply(text="The answer.", usage=usage))

    done = await dsh.run("-p", "a question", "--output-format", "json")

    assert done.code == 0, done.stderr
    [result] = done.json_lines()
    [session_id] = await dsh.session_ids()
    assert result["type"] == "result"
    assert result["isError"] is False
    assert result["result"] == "The answer."
    assert result["sessionId"] == session_id
    assert result["numTurns"] == 1
    assert result["usage"] == {"inputTokens": 600, "outputTokens": 50, "cacheReadTokens": 400}
    peak = 600 * FLASH_PRICE.cache_miss + 400 * FLASH_PRICE.cache_hit + 50 * FLASH_PRICE.output
    peak /= 1_000_000
    assert result["costUsd"] in (pytest.approx(peak), pytest.approx(peak / 2))
    assert set(result) == {
        "type", "subtype", "isError", "result", "error", "sessionId", "numTurns",
        "durationMs", "usage", "costUsd",
    }  # fmt: skip
    await dsh.checked_events()


async def test_stream_json_output_is_every_event_in_order(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(tool_calls=[echo("hi")]), Reply(text="Said hi."))

    done = await dsh.run("-p", "say hi", "--output-format", "stream-json")

    assert done.code == 0, done.stderr
    *lines, result = done.json_lines()
    assert len(lines) + 1 == len(done.stdout.splitlines())  # nothing but JSON lines
    [session_id] = await dsh.session_ids()
    # Every record says whose it is; the last sums the run up, as --output-format json.
    assert {line.pop("sessionId") for line in lines} == {session_id}
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(set(seqs))
    types = [line["type"] for line in lines]
    for wanted in ("turn/start", "tool/call", "tool/result", "assistant/chunk", "turn/end"):
        assert wanted in types
    stored = {e.seq: e.to_dict() for e in await dsh.checked_events()}
    assert lines == [stored[seq] for seq in seqs]
    assert result["type"] == "result"
    assert result["sessionId"] == session_id
    assert result["result"] == "Said hi."
    assert result["numTurns"] == 1


async def test_the_prompt_can_come_on_stdin(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Read it."))

    done = await dsh.run("-p", stdin="what does stdin say?\n")

    assert done.code == 0, done.stderr
    assert done.stdout == "Read it.\n"
    [body] = bodies(fake_llm)
    assert user_texts(body)[-1] == "what does stdin say?"
    await dsh.checked_events()


async def test_text_piped_with_a_prompt_follows_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # `git diff | dsh -p "review this change"`, as `dsh --help` shows: the diff was
    # dropped, since stdin was read only when no prompt was given.
    fake_llm.add(Reply(text="Reviewed."))
    diff = "diff --git a/x.py b/x.py\n+print('caf\u00e9')\n"

    done = await dsh.run("-p", "review this change", stdin=diff)

    assert done.code == 0, done.stderr
    assert done.stderr == "", done.stderr
    [body] = bodies(fake_llm)
    assert user_texts(body)[-1] == "review this change\n\n" + diff.rstrip()
    await dsh.checked_events()


async def test_a_file_on_stdin_with_a_prompt_follows_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Summed up."))
    notes = dsh.root / "notes.txt"
    notes.write_bytes(b"line one\nnot utf-8: \xff\n")

    with notes.open("rb") as stdin:
        child = await dsh.start("-p", "sum this up", stdin=stdin)
    done = await finish(child, stdin=None)

    assert done.code == 0, done.stderr
    [body] = bodies(fake_llm)
    assert user_texts(body)[-1] == "sum this up\n\nline one\nnot utf-8: \ufffd"


async def test_a_silent_open_stdin_does_not_hang_a_given_prompt(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    # A program that starts `dsh -p PROMPT` and never closes its stdin (a CI runner,
    # an editor): the prompt goes out alone after a short wait, which stderr names.
    fake_llm.add(Reply(text="Alone."))

    child = await dsh.start("-p", "just this")
    assert child.stdout is not None
    out = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)
    assert child.stdin is not None
    child.stdin.close()
    done = await finish(child, stdin=None)

    assert out == b"Alone.\n"
    assert done.code == 0, done.stderr
    assert "nothing came on stdin" in done.stderr
    [body] = bodies(fake_llm)
    assert user_texts(body)[-1] == "just this"


async def test_continue_picks_the_latest_session_of_the_cwd(dsh: Dsh, fake_llm: FakeLLM) -> None:
    elsewhere = dsh.root / "elsewhere"
    elsewhere.mkdir()
    fake_llm.add(*(Reply(text=f"Answer {n}.") for n in range(4)))
    runs = [
        await dsh.run("-p", "older here", "--output-format", "json"),
        await dsh.run("-p", "newer here", "--output-format", "json"),
        await dsh.run("-p", "somewhere else", "--output-format", "json", cwd=elsewhere),
        await dsh.run("-p", "and now?", "--continue", "--output-format", "json"),
    ]

    assert [r.code for r in runs] == [0, 0, 0, 0], [r.stderr for r in runs]
    ids = [r.json_lines()[0]["sessionId"] for r in runs]
    assert len(set(ids[:3])) == 3
    assert ids[3] == ids[1]
    continued = bodies(fake_llm)[-1]
    texts = user_texts(continued)
    assert "newer here" in texts
    assert texts[-1] == "and now?"
    assert "older here" not in texts
    assert "somewhere else" not in texts
    events = await dsh.events(ids[1])
    assert len(turn_ends(events)) == 2


async def test_a_rejected_key_exits_with_one_line_naming_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(fault=Fault(status=401)))

    done = await dsh.run("-p", "hello")

    assert done.code == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("dsh: ")
    assert "DEEPSEEK_API_KEY" in line
    assert done.stdout == ""
    events = await dsh.checked_events()
    assert turn_ends(events)[-1].reason.kind == "error"


async def test_a_missing_key_exits_with_one_line_naming_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    dsh.key = None

    done = await dsh.run("-p", "hello")

    assert done.code == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("dsh: ")
    assert "DEEPSEEK_API_KEY" in line
    assert fake_llm.requests == []
    events = await dsh.events()
    assert turn_ends(events)[-1].reason.kind == "error"
    # No request went out, so there is nothing to compare with the log's requests.
    assert check_log(events) == []


async def test_stream_json_commands_can_come_from_a_file(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # `dsh -p --input-format stream-json < commands.jsonl`: stdin is a regular file,
    # not a pipe.
    fake_llm.add(Reply(text="From a file."))
    commands = dsh.root / "commands.jsonl"
    commands.write_text(json.dumps({"type": "prompt", "text": "read from a file"}) + "\n")

    with commands.open("rb") as stdin:
        child = await dsh.start("-p", "--input-format", "stream-json", stdin=stdin)
    done = await finish(child, stdin=None)

    assert done.code == 0, done.stderr
    assert done.stdout == "From a file.\n"
    await dsh.checked_events()


async def test_a_reader_that_goes_away_cancels_the_run_quietly(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # `dsh -p ... | head -c 8`: stdout's reader leaves while the answer streams.
    fake_llm.add(Reply(text="x" * 400, chunk_size=4, chunk_delay_ms=5))
    read_end, write_end = os.pipe()
    try:
        # stdin as a shell gives it (not an open pipe, which dsh would wait on).
        child = await dsh.start(
            "-p", "stream a lot", stdin=asyncio.subprocess.DEVNULL, stdout=write_end
        )
    finally:
        os.close(write_end)
    try:
        first = await asyncio.wait_for(asyncio.to_thread(os.read, read_end, 8), TIMEOUT)
    finally:
        os.close(read_end)
    done = await finish(child, stdin=None)

    assert first.startswith(b"x")
    assert done.stderr == "", done.stderr[-2000:]  # says nothing more, as `yes | head` does
    assert done.code == 141  # what a shell reports for a closed pipe
    events = await dsh.checked_events()
    assert turn_ends(events)[-1].reason.kind == "aborted"  # stopped, not streamed to the end


async def test_a_title_costs_a_model_call_only_when_asked(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="It is 4."), Reply(text="Adding two and two"))
    done = await dsh.run("-p", "what is 2+2?", "--title")
    assert done.code == 0, done.stderr
    assert done.stdout == "It is 4.\n"
    events = await dsh.events()
    titles = [e.data for e in of_type(events, "session/title")]
    assert [(t.title, t.source) for t in titles] == [
        ("what is 2+2?", "fallback"),
        ("Adding two and two", "provider"),
    ]
    assert len(fake_llm.chat_requests) == 2

    fake_llm.add(Reply(text="Still 4."))
    again = await dsh.run("-p", "and now?")  # no --title: one request, no title at all
    assert again.code == 0, again.stderr
    assert len(fake_llm.chat_requests) == 3
    logs = [await dsh.events(session_id) for session_id in await dsh.session_ids()]
    untitled = [log for log in logs if not of_type(log, "session/title")]
    assert len(logs) == 2
    assert len(untitled) == 1
    assert any("and now?" in str(e.data) for e in of_type(untitled[0], "user/message"))


async def test_a_title_asked_with_no_plugin_to_write_it_is_said(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    settings = dsh.home / "settings.toml"
    settings.write_text(
        settings.read_text().replace("[plugins]", '[plugins]\ndisabled = ["title"]')
    )
    fake_llm.add(Reply(text="It is 4."))
    done = await dsh.run("-p", "what is 2+2?", "--title")
    assert done.code == 0, done.stderr
    assert done.stdout == "It is 4.\n"
    assert "--title: no plugin titles sessions" in done.stderr
    assert len(fake_llm.chat_requests) == 1
    assert not of_type(await dsh.events(), "session/title")


async def test_slash_commands_run_headless_without_a_model_turn(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Hello.", usage=Usage(prompt_tokens=1000, completion_tokens=10)))
    first = await dsh.run("-p", "hi")
    assert first.code == 0, first.stderr
    [session_id] = await dsh.session_ids()

    cost = await dsh.run("-p", "/cost", "--resume", session_id)
    assert cost.code == 0, cost.stderr
    assert "1 model calls: 1,000 input tokens" in cost.stdout
    assert len(fake_llm.chat_requests) == 1  # no model call for a command

    mode = await dsh.run("-p", "/permissions", "--resume", session_id)
    assert "Permission mode: default" in mode.stdout
    bad = await dsh.run("-p", "/model nowhere/none", "--resume", session_id)
    assert bad.code == 1
    assert "cannot use nowhere/none" in bad.stderr

    fake_llm.add(Reply(text="# AGENTS.md drafted"))
    init = await dsh.run("-p", "/init", "--resume", session_id)
    assert init.code == 0, init.stderr
    assert "Write an AGENTS.md file" in user_texts(fake_llm.chat_requests[-1].body)[-1]
    events = await dsh.checked_events(session_id)
    runs = [e.data.name for e in of_type(events, "command/run")]
    assert runs == ["permissions", "model", "init"]  # /cost is not recorded


async def test_stream_json_keeps_events_with_a_lone_surrogate(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # A stdin line may carry half an emoji as its JSON escape; stdout is strict UTF-8.
    fake_llm.add(Reply(text="Seen."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "half an emoji: \ud83d"})
    await close_stdin(child)
    done = await finish(child, stdin=None)

    assert done.code == 0, done.stderr
    assert "subscriber failed" not in done.stderr
    *lines, result = done.json_lines()
    assert result["type"] == "result"
    assert len(lines) + 1 == len(done.stdout.splitlines())  # nothing but JSON lines
    seqs = [line["seq"] for line in lines]
    assert seqs == list(range(seqs[0], seqs[-1] + 1))  # no event left out
    prompts = [line["data"] for line in lines if line["type"] == "user/message"]
    [prompt] = [p for p in prompts if p["source"]["kind"] == "user"]
    assert prompt["content"] == [{"type": "text", "text": "half an emoji: \ud83d"}]
    stored = {e.seq: e.to_dict() for e in await dsh.checked_events()}
    assert [{k: v for k, v in line.items() if k != "sessionId"} for line in lines] == [
        stored[seq] for seq in seqs
    ]


@pytest.mark.parametrize("model", ["deepseek-reasoner", "deepseek-v4-flash-0731"])
async def test_an_unknown_model_id_gets_its_reasoning_back(
    dsh: Dsh, fake_llm: FakeLLM, model: str
) -> None:
    fake_llm.add(
        Reply(reasoning="Echo first.", tool_calls=[echo("one")]),
        Reply(tool_calls=[echo("two")]),  # a step that streamed no reasoning
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "echo twice", "--model", model)

    assert done.code == 0, done.stderr
    sent = bodies(fake_llm)
    assert [b["model"] for b in sent] == [model] * 3
    replayed = [
        [m.get("reasoning_content") for m in body["messages"] if m["role"] == "assistant"]
        for body in sent
    ]
    # Once an answer carried reasoning, every assistant message carries the field.
    assert replayed == [[], ["Echo first."], ["Echo first.", ""]]
    await dsh.checked_events()


async def test_a_refusal_is_the_answer_with_its_own_finish(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(refusal="I can't help with that."))

    done = await dsh.run("-p", "something it declines")

    assert done.code == 0, done.stderr
    assert done.stdout == "I can't help with that.\n"
    assert "returned nothing" not in done.stderr
    events = await dsh.checked_events()
    finishes = [
        e.data.chunk.reason.kind
        for e in of_type(events, "assistant/chunk")
        if isinstance(e.data, AssistantChunk) and isinstance(e.data.chunk, Finish)
    ]
    assert finishes == ["refusal"]
    [answer] = [e.data for e in of_type(events, "assistant/message")]
    assert isinstance(answer, AssistantMessageData)
    assert answer.message.text() == "I can't help with that."
    assert [end.reason.kind for end in turn_ends(events)] == ["completed"]


async def test_temperature_is_sent_only_with_thinking_off(dsh: Dsh, fake_llm: FakeLLM) -> None:
    settings = dsh.home / "settings.toml"
    settings.write_text(settings.read_text() + "\n[agent]\ntemperature = 0.3\n")
    fake_llm.add(Reply(reasoning="Hm.", text="Thought."), Reply(text="Plain."))

    thinking = await dsh.run("-p", "think")
    plain = await dsh.run("-p", "do not think", "--effort", "off")

    assert (thinking.code, plain.code) == (0, 0), thinking.stderr + plain.stderr
    first, second = bodies(fake_llm)
    assert first["reasoning_effort"] == "high"
    assert "temperature" not in first
    assert second["thinking"] == {"type": "disabled"}
    assert second["temperature"] == 0.3


async def test_sessions_command_lists_what_storage_holds(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """``/sessions`` reads the index brought up to date with the logs first: a lost
    index is rebuilt, a session whose log is gone is not listed (issue 34)."""
    fake_llm.add(Reply(text="kept"), Reply(text="lost"), Reply(text="current"))
    assert (await dsh.run("-p", "kept")).code == 0
    assert (await dsh.run("-p", "lost")).code == 0
    assert (await dsh.run("-p", "current")).code == 0
    kept, lost, current = await dsh.session_ids()
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        (dsh.home / name).unlink(missing_ok=True)
    [log] = [p for p in dsh.home.rglob("session.jsonl") if lost in str(p)]
    log.unlink()

    done = await dsh.run("-p", "/sessions", "--resume", current)

    assert done.code == 0, done.stderr
    assert current[:8] in done.stdout
    assert kept[:8] in done.stdout
    assert lost[:8] not in done.stdout


CANCEL_CYCLES = 20


async def test_a_prompt_sent_right_after_a_cancelled_turn_ends_always_runs(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """The driver's pattern that lost prompts: a turn is cancelled, and the next prompt
    is sent with the cancel or the moment the turn's end is printed. Each one runs,
    cycle after cycle."""
    for cycle in range(CANCEL_CYCLES):
        fake_llm.add(
            Reply(text=f"never {cycle}", first_byte_delay_ms=20_000),
            Reply(text=f"answer {cycle}"),
        )
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    ends: list[str] = []
    await send(child, {"type": "prompt", "text": "slow 0"})
    async for event in stream_events(child):
        cycle = len(ends) // 2
        if event["type"] == "step/start" and len(ends) % 2 == 0:
            # The slow request is at the server: cancel it there.
            deadline = asyncio.get_running_loop().time() + HANG_S
            while len(fake_llm.chat_requests) <= 2 * cycle:
                assert asyncio.get_running_loop().time() < deadline, "no request came"
                await asyncio.sleep(0.01)
            # Every other cycle the next prompt goes with the cancel, in one write:
            # it arrives before the cancelled turn has ended.
            together = [{"type": "prompt", "text": f"right after {cycle}"}] if cycle % 2 else []
            await send(child, {"type": "cancel"}, *together)
        if event["type"] != "turn/end":
            continue
        ends.append(event["data"]["reason"]["kind"])
        if len(ends) % 2 and cycle % 2 == 0:
            await send(child, {"type": "prompt", "text": f"right after {cycle}"})
        elif cycle + 1 < CANCEL_CYCLES:
            await send(child, {"type": "prompt", "text": f"slow {cycle + 1}"})
        else:
            await close_stdin(child)
    done = await finish(child, stdin=None)

    assert done.code == 0, done.stderr
    assert ends == ["aborted", "completed"] * CANCEL_CYCLES
    events = await dsh.checked_events()
    answered = [e.data.message.text() for e in of_type(events, "assistant/message")]
    assert [text for text in answered if text.startswith("answer")] == [
        f"answer {cycle}" for cycle in range(CANCEL_CYCLES)
    ]
    assert fake_llm.remaining == 0


async def test_a_tool_call_written_as_dsml_text_runs_through_the_loop(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """DeepSeek writes its call into ``content`` as DSML markup and finishes ``stop``:
    the call still runs, the markup never reaches the output, and the next request
    sends the call back as a real tool call paired with its result."""
    bar = "\uff5c"
    m = f"{bar}DSML{bar}"
    answer = (
        "Let me echo that.\n"
        f'<{m}tool_calls>\n<{m}invoke name="echo">\n'
        f'<{m}parameter name="text" string="true">from markup</{m}parameter>\n'
        f"</{m}invoke>\n</{m}tool_calls>"
    )
    pieces = [answer[i : i + 5] for i in range(0, len(answer), 5)]
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-v4-flash"}
    events: list[dict[str, Any] | str] = [
        {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        *(
            {**chunk, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
            for p in pieces
        ),
        {**chunk, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}]},
        "[DONE]",
    ]
    fake_llm.add(Reply(events=events), Reply(text="The echo said: from markup."))

    done = await dsh.run("-p", "echo 'from markup'")

    assert done.code == 0, done.stderr
    assert done.stdout == "Let me echo that.\n\nThe echo said: from markup.\n"
    assert "DSML" not in done.stdout + done.stderr
    assert '[tool] echo {"text": "from markup"}' in done.stderr
    await dsh.checked_events()
    [_, second] = bodies(fake_llm)
    assert tool_outputs(second) == ["echo: from markup"]
    [called] = [m for m in second["messages"] if m["role"] == "assistant"]
    assert called["content"] == "Let me echo that.\n"
    [call] = called["tool_calls"]
    assert call["id"].startswith("dsml-")
    assert call["function"] == {"name": "echo", "arguments": '{"text": "from markup"}'}
