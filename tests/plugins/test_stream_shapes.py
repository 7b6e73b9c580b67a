"""Streams as servers really send them, through the real adapter against the scripted
server: recorded shapes (``Reply.events``) that are not the textbook one."""

from __future__ import annotations

from typing import Any

import pytest

from dsh.llm import (
    FinishError,
    FinishStop,
    FinishToolCalls,
    RetryNotice,
    TextBlock,
    ToolCallBlock,
    assemble,
)
from dsh.testing import FakeLLM, Reply
from tests.plugins.test_llm_deepseek import deepseek, request, run

USAGE = {
    "prompt_tokens": 30,
    "completion_tokens": 5,
    "total_tokens": 35,
    "prompt_cache_hit_tokens": 0,
    "prompt_cache_miss_tokens": 30,
}


def chunk(*choices: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": "0c7d5bd1",
        "object": "chat.completion.chunk",
        "created": 1764000000,
        "model": "deepseek-v4-flash",
        "choices": list(choices),
        **fields,
    }


def choice(index: int = 0, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


async def test_choices_beyond_the_first_are_not_woven_into_the_answer(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three answers streamed side by side (a server ignoring ``n``, a proxy fanning
    out): the answer is the first one alone, its tool call alone."""
    events: list[dict[str, Any] | str] = [
        chunk(*(choice(i, role="assistant", content="") for i in range(3))),
        chunk(
            choice(0, content="The answer "), choice(1, content="Another "), choice(2, content="X")
        ),
        chunk(choice(2, content="Y"), choice(1, content="reply"), choice(0, content="is 4.")),
        chunk(
            choice(
                1,
                tool_calls=[
                    {"index": 0, "id": "call_b", "function": {"name": "bash", "arguments": "{}"}}
                ],
            ),
            choice(
                0,
                tool_calls=[
                    {"index": 0, "id": "call_a", "function": {"name": "read", "arguments": ""}}
                ],
            ),
        ),
        chunk(choice(0, tool_calls=[{"index": 0, "function": {"arguments": '{"path":"a.py"}'}}])),
        chunk(choice(1, "stop"), choice(2, "length")),
        chunk(choice(0, "tool_calls", content="")),
        chunk(usage=USAGE),
        "[DONE]",
    ]
    fake_llm.add(Reply(events=events))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert assembled.content == (
        TextBlock(text="The answer is 4."),
        ToolCallBlock(id="call_a", name="read", arguments='{"path":"a.py"}'),
    )
    assert isinstance(assembled.finish, FinishToolCalls)
    assert assembled.usage is not None
    assert assembled.usage.input_tokens == 30


async def test_empty_choices_and_usage_only_chunks_are_tolerated(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[dict[str, Any] | str] = [
        chunk(),  # nothing yet: a keep-alive of sorts some servers send
        chunk(choice(0, role="assistant", content="")),
        chunk(),
        chunk(choice(0, content="Hello")),
        chunk(choice(0, "stop", content="")),
        chunk(usage=USAGE),  # OpenAI's shape: usage alone, choices empty
        "[DONE]",
    ]
    fake_llm.add(Reply(events=events))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert assembled.content == (TextBlock(text="Hello"),)
    assert isinstance(assembled.finish, FinishStop)
    assert assembled.usage is not None
    assert assembled.usage.output_tokens == 5


async def test_a_blank_id_or_name_in_a_later_delta_changes_nothing(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Later deltas sending ``""`` or null for the id and name (or repeating the name)
    keep what was set; a name that came blank at first is taken when it arrives."""

    def call(index: int, arguments: str, id: Any = None, name: Any = None) -> dict[str, Any]:
        return {
            "index": index,
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    events: list[dict[str, Any] | str] = [
        chunk(choice(0, role="assistant", content="")),
        chunk(choice(0, tool_calls=[call(0, "", "call_a", "read")])),
        chunk(choice(0, tool_calls=[call(0, '{"path":', "", "")])),
        chunk(choice(0, tool_calls=[call(0, '"a.py"}', None, None)])),
        chunk(choice(0, tool_calls=[call(0, "", "", "read")])),
        chunk(choice(0, tool_calls=[call(1, "", "call_b", "")])),
        chunk(choice(0, tool_calls=[call(1, '{"pattern":"x"}', "", "grep")])),
        chunk(choice(0, tool_calls=[call(1, "", None, "")])),
        chunk(choice(0, "tool_calls"), usage=USAGE),
        "[DONE]",
    ]
    fake_llm.add(Reply(events=events))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert assembled.content == (
        ToolCallBlock(id="call_a", name="read", arguments='{"path":"a.py"}'),
        ToolCallBlock(id="call_b", name="grep", arguments='{"pattern":"x"}'),
    )
    assert isinstance(assembled.finish, FinishToolCalls)


async def test_a_content_filter_stop_is_a_clear_error_and_not_retried(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="I can", finish_reason="content_filter"))
    fake_llm.add(Reply(text="must not be requested"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    notices: list[RetryNotice] = []
    assembled = assemble(await run(service, request(), notices))
    assert isinstance(assembled.finish, FinishError)
    assert assembled.finish.failure.code == "CONTENT_FILTER"
    assert "content filter stopped the answer" in assembled.finish.failure.message
    assert notices == []
    assert len(fake_llm.requests) == 1


async def test_insufficient_system_resource_is_retried_with_backoff(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeepSeek's capacity stop before any content is an attempt that never started:
    retried, and the retry's answer is the answer."""
    fake_llm.add(Reply(finish_reason="insufficient_system_resource"))
    fake_llm.add(Reply(text="Here it is."))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    notices: list[RetryNotice] = []
    assembled = assemble(await run(service, request(), notices))
    assert assembled.content == (TextBlock(text="Here it is."),)
    assert [n.failure.code for n in notices] == ["OVERLOADED"]
    assert "short of capacity" in notices[0].failure.message


async def test_insufficient_system_resource_mid_answer_keeps_what_arrived(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="The first half", finish_reason="insufficient_system_resource"))
    fake_llm.add(Reply(text="must not be requested"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert isinstance(assembled.finish, FinishError)
    assert assembled.finish.failure.code == "OVERLOADED"
    assert assembled.interrupted_blocks() == (TextBlock(text="The first half"),)
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("end", ["closed", "cut"])
async def test_a_finished_answer_without_done_is_complete(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    """The finish chunk came, then the body ended (or the connection broke) with no
    ``[DONE]``: the answer is whole, not interrupted."""
    events: list[dict[str, Any] | str] = [
        chunk(choice(0, role="assistant", content="")),
        chunk(choice(0, content="All done.")),
        chunk(choice(0, "stop", content=""), usage=USAGE),
    ]
    fake_llm.add(Reply(events=events, cut_after=3 if end == "cut" else None))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert assembled.content == (TextBlock(text="All done."),)
    assert isinstance(assembled.finish, FinishStop)
    assert not assembled.failed


async def test_a_stream_cut_before_its_finish_is_still_broken(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[dict[str, Any] | str] = [
        chunk(choice(0, role="assistant", content="")),
        chunk(choice(0, content="Half an")),
        chunk(choice(0, content=" answer")),
    ]
    fake_llm.add(Reply(events=events))
    fake_llm.add(Reply(text="must not be requested"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert isinstance(assembled.finish, FinishError)
    assert assembled.finish.failure.code == "STREAM_CLOSED"
    assert assembled.interrupted_blocks() == (TextBlock(text="Half an answer"),)
    assert len(fake_llm.requests) == 1
