"""The DeepSeek adapter over real HTTP against the scripted server."""

from __future__ import annotations

import asyncio
import datetime
import json
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh.agent import AgentOptions
from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.llm import (
    AssistantMessage,
    CallId,
    FinishAborted,
    FinishError,
    FinishToolCalls,
    GenerateOptions,
    LlmCallConfig,
    LlmService,
    ModelSource,
    ReasoningBlock,
    RetryNotice,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolSchema,
    assemble,
    tool_result,
    user_text,
)
from dsh.services import LLM
from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec, Usage
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter
from dsh_plugins.llm_deepseek import DEFAULT_MODEL, DEFAULT_MODELS
from dsh_plugins.llm_deepseek import plugin as deepseek_plugin
from tests.support.waits import HANG_S

GOLDEN = Path(__file__).parent / "golden"
KEY = "sk-test-0123456789"
FAST_RETRY = {"max_retries": 3, "base_delay_ms": 1, "max_delay_ms": 5}


async def deepseek(
    base_url: str | None, monkeypatch: pytest.MonkeyPatch, **config: Any
) -> LlmService:
    """An LLM service with the DeepSeek plugin loaded as dsh loads it."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    root = Context()
    service = LlmService(root)
    root.provide(LLM, service)
    if base_url is not None:
        config.setdefault("base_url", base_url)
    config.setdefault("retry", FAST_RETRY)
    [record] = await PluginHost(root).load(
        [Candidate("llm-deepseek", "test", plugin=deepseek_plugin)],
        configs={"llm-deepseek": config},
    )
    assert record.status is PluginStatus.LOADED, record.error
    return service


def request(model: str = "deepseek-flash", **fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (user_text("What is in main.py?"),))
    return GenerateOptions(provider="deepseek", model=model, **fields)


def prepared(service: LlmService, model: str = "deepseek-flash", **fields: Any) -> GenerateOptions:
    """A request carrying the model's defaults, as the loop builds it."""
    call = service.prepare_call(LlmCallConfig(provider="deepseek", model=model)).config
    return request(
        model, reasoning_effort=call.reasoning_effort, max_tokens=call.max_tokens, **fields
    )


async def run(
    service: LlmService, options: GenerateOptions, notices: list[RetryNotice] | None = None
) -> list[StreamChunk]:
    return [
        c
        async for c in service.stream(
            options, on_retry=notices.append if notices is not None else None
        )
    ]


# ---------------------------------------------------------------------- streaming


async def test_reasoning_and_text_stream_with_cache_hit_usage(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(
        Reply(
            reasoning="The user wants the file summarised.",
            text="It starts the CLI.",
            usage=Usage(
                prompt_tokens=1200, completion_tokens=40, cache_hit_tokens=1000, reasoning_tokens=25
            ),
        )
    )
    service = await deepseek(fake_llm.base_url, monkeypatch)
    chunks = await run(service, prepared(service))
    assembled = assemble(chunks)
    assert assembled.content == (
        ReasoningBlock(text="The user wants the file summarised."),
        TextBlock(text="It starts the CLI."),
    )
    assert assembled.usage == TokenUsage(
        input_tokens=200, output_tokens=40, cache_read_tokens=1000, reasoning_tokens=25
    )
    sent = fake_llm.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["user-agent"].startswith("dsh/")
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.body["thinking"] == {"type": "enabled"}
    assert sent.body["reasoning_effort"] == "high"
    assert sent.body["max_tokens"] == 384_000
    assert sent.body["stream_options"] == {"include_usage": True}


async def test_parallel_tool_calls_merge_by_index_with_raw_arguments(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(
        Reply(
            reasoning="Read both files.",
            tool_calls=[
                ToolCallSpec(
                    id="call_00_a", name="read", arguments={"path": "src/main.py", "limit": 200}
                ),
                ToolCallSpec(id="call_01_b", name="read", arguments='{"path": "README.md"}'),
            ],
            chunk_size=3,
        )
    )
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, prepared(service)))
    assert isinstance(assembled.finish, FinishToolCalls)
    calls = [b for b in assembled.content if isinstance(b, ToolCallBlock)]
    assert calls == [
        ToolCallBlock(
            id=CallId("call_00_a"),
            name="read",
            arguments=json.dumps({"path": "src/main.py", "limit": 200}),
        ),
        ToolCallBlock(id=CallId("call_01_b"), name="read", arguments='{"path": "README.md"}'),
    ]


# ---------------------------------------------------------------------- the request


def conversation() -> tuple[Any, ...]:
    """Two user turns; the first used two parallel tool calls in thinking mode."""
    model = ModelSource(provider="deepseek", model="deepseek-v4-pro")
    return (
        user_text("Why does the build fail?"),
        AssistantMessage(
            content=(
                ReasoningBlock(text="I need the Makefile and the CI log."),
                TextBlock(text="Let me look."),
                ToolCallBlock(
                    id=CallId("call_00_mk"), name="read", arguments='{"path":"Makefile"}'
                ),
                ToolCallBlock(
                    id=CallId("call_01_ci"), name="bash", arguments='{"command":"cat ci.log"}'
                ),
            ),
            source=model,
        ),
        tool_result(CallId("call_00_mk"), "all:\n\tcc -o app main.c"),
        tool_result(CallId("call_01_ci"), "", is_error=None),
        AssistantMessage(
            content=(
                ReasoningBlock(text="main.c is missing."),
                TextBlock(text="main.c is not in the repo."),
            ),
            source=model,
        ),
        user_text("Create it."),
        AssistantMessage(  # a tool-call turn without visible reasoning
            content=(
                ToolCallBlock(id=CallId("call_02_w"), name="write", arguments='{"path":"main.c"}'),
            ),
            source=model,
        ),
        tool_result(CallId("call_02_w"), "wrote 1 line"),
    )


TOOLS = (
    ToolSchema(
        name="bash",
        description="Run a command",
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    ),
    ToolSchema(
        name="read",
        description="Read a file",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    ),
)


@pytest.mark.parametrize("model", ["deepseek-flash", "deepseek-v4-pro"])
async def test_the_exact_json_sent_for_a_multi_turn_tool_conversation(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    fake_llm.add(Reply(text="Done."))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    options = prepared(service, model, messages=conversation(), system="You are dsh.", tools=TOOLS)
    await run(service, options)
    golden = json.loads((GOLDEN / "deepseek_request.json").read_text())
    golden["model"] = model
    assert fake_llm.requests[-1].body == golden


@pytest.mark.parametrize("model", ["deepseek-reasoner", "deepseek-v4-flash-0731"])
async def test_an_unknown_model_id_gets_its_reasoning_back(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    fake_llm.add(Reply(text="ok"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    await run(service, prepared(service, model, messages=conversation()))
    body = fake_llm.requests[-1].body
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    # The conversation shows the model thinks: every assistant message carries the
    # field, the one without reasoning an empty one.
    assert [m["reasoning_content"] for m in assistants] == [
        "I need the Makefile and the CI log.",
        "main.c is missing.",
        "",
    ]
    assert "thinking" not in body  # no effort chosen: the server's default
    assert "reasoning_effort" not in body
    assert "max_tokens" not in body  # undeclared models get no output cap
    assert body["messages"][1]["tool_calls"][0]["id"] == "call_00_mk"


async def test_an_unknown_model_id_takes_the_thinking_switch(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="ok"), Reply(text="ok"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    first = request("deepseek-v4-flash-0731", reasoning_effort="max", temperature=0.3)
    await run(service, first)
    body = fake_llm.requests[-1].body
    assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, "max")
    assert "temperature" not in body  # thinking mode ignores it
    await run(service, request("deepseek-reasoner", reasoning_effort="off", temperature=0.3))
    body = fake_llm.requests[-1].body
    assert body["thinking"] == {"type": "disabled"}
    assert body["temperature"] == 0.3


async def test_no_temperature_in_thinking_mode(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="ok"), Reply(text="ok"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    await run(service, prepared(service, temperature=0.2, messages=conversation()))
    thinking = fake_llm.requests[-1].body
    assert thinking["reasoning_effort"] == "high"  # the model's default: thinking on
    assert "temperature" not in thinking
    await run(service, request(reasoning_effort="off", temperature=0.2, messages=conversation()))
    plain = fake_llm.requests[-1].body
    assert plain["temperature"] == 0.2
    # Reasoning answers carried still goes back; the message without any gets no field.
    assistants = [m for m in plain["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == [
        "I need the Makefile and the CI log.",
        "main.c is missing.",
        None,
    ]


async def test_replay_reasoning_false_sends_no_reasoning(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="ok"))
    service = await deepseek(fake_llm.base_url, monkeypatch, replay_reasoning=False)
    await run(service, prepared(service, messages=conversation()))
    body = fake_llm.requests[-1].body
    assert body["thinking"] == {"type": "enabled"}
    assert all("reasoning_content" not in m for m in body["messages"])


@pytest.mark.parametrize(
    ("fields", "thinking", "effort"),
    [
        ({"reasoning_effort": "off"}, {"type": "disabled"}, None),
        ({"reasoning_effort": "max"}, {"type": "enabled"}, "max"),
        ({"reasoning_effort": "max", "purpose": "session-title"}, {"type": "disabled"}, None),
        ({}, None, None),  # nothing chosen: the provider's own default
    ],
)
async def test_thinking_switch_and_effort(
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    fields: dict[str, Any],
    thinking: Any,
    effort: Any,
) -> None:
    fake_llm.add(Reply(text="ok"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    await run(service, request(**fields))
    body = fake_llm.requests[-1].body
    assert body.get("thinking") == thinking
    assert body.get("reasoning_effort") == effort


async def test_endpoint_from_environment_and_settings(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="via env"))
    monkeypatch.setenv("DEEPSEEK_BASE_URL", fake_llm.base_url)
    service = await deepseek(None, monkeypatch)
    assert assemble(await run(service, request())).content == (TextBlock(text="via env"),)
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
    fake_llm.add(Reply(text="via settings"))
    service = await deepseek(fake_llm.base_url, monkeypatch)  # settings win over the environment
    assert assemble(await run(service, request())).content == (TextBlock(text="via settings"),)


async def test_models_settings_and_catalog(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = await deepseek(
        fake_llm.base_url,
        monkeypatch,
        models={
            "deepseek-v4-flash": {"context_window": 500_000},
            "my-finetune": {"context_window": 64_000},
        },
    )
    flash = service.resolve("deepseek", "deepseek-v4-flash")
    assert flash.context_window == 500_000
    assert flash.default_max_tokens == 384_000  # untouched fields keep their defaults
    assert flash.reasoning is not None
    assert [e.id for e in flash.reasoning.efforts] == ["off", "low", "high", "max"]
    assert service.resolve("deepseek", "my-finetune").context_window == 64_000
    unknown = service.resolve("deepseek", "deepseek-reasoner")
    assert unknown.context_window is None
    assert unknown.reasoning is not None  # efforts, but no default: the server decides
    assert unknown.reasoning.default_effort is None
    listed = {m.id for m in await service.list_models("deepseek")}
    assert {"deepseek-v4-flash", "deepseek-v4-pro", "deepseek-flash", "my-finetune"} <= listed
    assert DEFAULT_MODELS["deepseek-v4-pro"].price is not None
    cost = service.cost(
        "deepseek", "deepseek-v4-pro", TokenUsage(input_tokens=1_000_000, output_tokens=0)
    )
    assert cost in (pytest.approx(1.32), pytest.approx(0.66))  # peak or off-peak, by the clock


# ---------------------------------------------------------------------- failures


async def test_connection_refused_is_a_transport_failure_after_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A port bound but not listening refuses connections, and stays ours for the whole
    # test: a port merely found free could be taken meanwhile by a test beside this one.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        service = await deepseek(f"http://127.0.0.1:{port}", monkeypatch)
        notices: list[RetryNotice] = []
        chunks = await run(service, request(), notices)
    failure = chunks[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == "TRANSPORT"
    assert "cannot reach deepseek" in failure.message
    assert len(notices) == 3


async def test_a_dns_failure_is_a_transport_failure() -> None:
    # Name resolution cannot fail here without a network, so the transport raises
    # exactly what httpx raises for an unknown host.
    def unknown_host(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    adapter = ChatCompletionsAdapter(
        base_url="https://api.deepseek.invalid",
        models=DEFAULT_MODELS,
        api_key=lambda: KEY,
        client=httpx.AsyncClient(transport=httpx.MockTransport(unknown_host)),
    )
    service = LlmService(sleep=lambda s: asyncio.sleep(0))
    service.register_adapter(["deepseek"], adapter)
    failure = (await run(service, request()))[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == "TRANSPORT"
    assert "Name or service not known" in failure.message


async def test_a_rejected_key_names_the_credential_and_is_not_retried(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(
        Reply(
            fault=Fault(
                status=401,
                body={
                    "error": {
                        "message": "Authentication Fails, Your api key is invalid",
                        "type": "authentication_error",
                        "code": "invalid_request_error",
                    }
                },
            )
        )
    )
    service = await deepseek(fake_llm.base_url, monkeypatch)
    notices: list[RetryNotice] = []
    failure = (await run(service, request(), notices))[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == "AUTH"
    assert failure.status == 401
    assert "Your api key is invalid" in failure.message
    assert "DEEPSEEK_API_KEY" in failure.message
    assert notices == []


async def test_a_missing_key_is_named_and_nothing_is_sent(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = await deepseek(fake_llm.base_url, monkeypatch)
    monkeypatch.delenv("DEEPSEEK_API_KEY")
    failure = (await run(service, request()))[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == "MISSING_CREDENTIAL"
    assert "DEEPSEEK_API_KEY" in failure.message
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("Invalid tools: function name must match ^[a-zA-Z0-9_-]+$", "INVALID_REQUEST"),
        (
            "This model's maximum context length is 1000000 tokens. However, you requested 1200000",
            "CONTEXT_WINDOW_EXCEEDED",
        ),
    ],
)
async def test_a_bad_request_carries_the_providers_own_words(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, message: str, code: str
) -> None:
    fake_llm.add(
        Reply(
            fault=Fault(
                status=400, body={"error": {"message": message, "type": "invalid_request_error"}}
            )
        )
    )
    service = await deepseek(fake_llm.base_url, monkeypatch)
    failure = (await run(service, request()))[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == code
    assert message in failure.message
    assert len(fake_llm.requests) == 1


async def test_rate_limits_honour_retry_after(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(
        Reply(
            fault=Fault(status=429, retry_after=0.3, headers={"x-ratelimit-reset-requests": "2s"})
        )
    )
    fake_llm.add(Reply(text="after the wait"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    notices: list[RetryNotice] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    chunks = await run(service, request(), notices)
    assert loop.time() - started >= 0.3
    assert assemble(chunks).content == (TextBlock(text="after the wait"),)
    [notice] = notices
    assert notice.delay_ms == 300
    assert notice.failure.code == "RATE_LIMIT"
    assert notice.failure.reset_at_ms is not None


async def test_server_errors_are_retried_until_they_pass_or_run_out(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(2):
        fake_llm.add(Reply(fault=Fault(status=503)))
    fake_llm.add(Reply(text="third time"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assert assemble(await run(service, request())).content == (TextBlock(text="third time"),)
    for _ in range(4):
        fake_llm.add(Reply(fault=Fault(status=500)))
    notices: list[RetryNotice] = []
    failure = (await run(service, request(), notices))[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == "SERVER"
    assert [n.retry for n in notices] == [1, 2, 3]


async def test_a_stream_that_closes_after_the_role_chunk_is_retried(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the role chunk, then the connection closes (or a malformed event comes
    first): nothing was shown, so it is retried like a failed connection."""
    fake_llm.add(Reply(text="never seen", cut_after=1))
    fake_llm.add(Reply(text="never seen either", malformed_at=0))
    fake_llm.add(Reply(text="Here it is."))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    notices: list[RetryNotice] = []
    assembled = assemble(await run(service, request(), notices))
    assert assembled.content == (TextBlock(text="Here it is."),)
    assert [n.failure.code for n in notices] == ["STREAM_CLOSED", "MALFORMED_RESPONSE"]
    assert len(fake_llm.requests) == 3


async def test_a_stream_cut_midway_keeps_what_arrived_and_is_not_retried(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(
        Reply(
            reasoning="Checking the tests first.",
            text="The failing test is",
            chunk_size=5,
            cut_after=8,
        )
    )
    fake_llm.add(Reply(text="must not be requested"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert isinstance(assembled.finish, FinishError)
    assert assembled.finish.failure.code == "STREAM_CLOSED"
    assert assembled.interrupted_blocks()  # the user keeps what they saw
    assert len(fake_llm.requests) == 1


async def test_a_malformed_event_is_reported(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="Hello there, this is fine", chunk_size=4, malformed_at=3))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    assembled = assemble(await run(service, request()))
    assert isinstance(assembled.finish, FinishError)
    assert assembled.finish.failure.code == "MALFORMED_RESPONSE"
    assert "not JSON" in assembled.finish.failure.message


async def test_a_slow_first_byte_times_out_and_is_retried(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="late", first_byte_delay_ms=1000))
    fake_llm.add(Reply(text="prompt"))
    service = await deepseek(fake_llm.base_url, monkeypatch, read_timeout=0.2)
    notices: list[RetryNotice] = []
    assert assemble(await run(service, request(), notices)).content == (TextBlock(text="prompt"),)
    assert [n.failure.code for n in notices] == ["TIMEOUT"]


async def test_cancelling_closes_the_http_stream(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten events, then the server holds the stream open forever: only the client
    # closing the connection can end it, so a disconnection is the cancel's doing.
    fake_llm.add(Reply(text="a long answer " * 50, chunk_size=3, hold_after=10))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    signal = asyncio.Event()
    chunks: list[StreamChunk] = []
    streaming = asyncio.Event()

    async def consume() -> None:
        async for chunk in service.stream(request(signal=signal)):
            chunks.append(chunk)
            streaming.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(streaming.wait(), HANG_S)
    signal.set()
    await asyncio.wait_for(task, HANG_S)
    assert isinstance(chunks[-1].reason, FinishAborted)  # type: ignore[union-attr]
    async with asyncio.timeout(HANG_S):
        while fake_llm.requests[-1].disconnected_at is None:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


# ------------------------------------------------------------- models (issue 21)


async def test_the_default_model_is_sent_as_deepseek_flash(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="hi"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    await run(service, prepared(service, AgentOptions().model))
    assert fake_llm.requests[-1].body["model"] == "deepseek-flash"
    assert DEFAULT_MODEL == AgentOptions().model == "deepseek-flash"


@pytest.mark.parametrize("legacy", ["deepseek-v4-flash", "deepseek-v4-flash-vision-exp"])
async def test_a_legacy_id_is_sent_as_deepseek_flash(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, legacy: str
) -> None:
    fake_llm.add(Reply(text="hi"))
    service = await deepseek(fake_llm.base_url, monkeypatch)
    resolved = service.resolve("deepseek", legacy)
    assert (resolved.sent_as, resolved.vision) == ("deepseek-flash", True)
    await run(service, prepared(service, legacy))
    sent = fake_llm.requests[-1].body
    assert (sent["model"], sent["max_tokens"]) == ("deepseek-flash", 384_000)
    assert sent["thinking"] == {"type": "enabled"}
    assert sent["reasoning_effort"] == "high"


async def test_facts_come_from_the_table(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = await deepseek(fake_llm.base_url, monkeypatch)
    flash = service.resolve("deepseek", "deepseek-flash")
    pro = service.resolve("deepseek", "deepseek-v4-pro")
    assert (flash.context_window, flash.default_max_tokens, flash.vision) == (
        1_000_000,
        384_000,
        True,
    )
    assert (pro.context_window, pro.default_max_tokens, pro.vision) == (1_000_000, 384_000, False)
    assert pro.reasoning is not None
    assert pro.reasoning.default_effort == "high"


def beijing(year: int, month: int, day: int, hour: int) -> datetime.datetime:
    return datetime.datetime(year, month, day, hour, tzinfo=datetime.timezone(timedelta(hours=8)))


async def test_a_listed_holiday_is_priced_off_peak(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = await deepseek(fake_llm.base_url, monkeypatch)
    million_out = TokenUsage(input_tokens=0, output_tokens=1_000_000)
    # 2026-10-02 is a Friday of the National Day holiday; 2026-10-09 a Friday at work.
    holiday = service.cost("deepseek", "deepseek-flash", million_out, beijing(2026, 10, 2, 10))
    workday = service.cost("deepseek", "deepseek-flash", million_out, beijing(2026, 10, 9, 10))
    lunch = service.cost("deepseek", "deepseek-flash", million_out, beijing(2026, 10, 9, 13))
    assert (holiday, workday, lunch) == (pytest.approx(0.60), pytest.approx(1.20), 0.60)


async def test_settings_override_a_fact_and_keep_the_calendar(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.add(Reply(text="hi"))
    service = await deepseek(
        fake_llm.base_url,
        monkeypatch,
        models={
            "deepseek-v4-pro": {
                "vision": True,
                "max_output_tokens": 100_000,
                "price": {"cache_hit": 0.1, "cache_miss": 2.0, "output": 4.0},
            }
        },
    )
    pro = service.resolve("deepseek", "deepseek-v4-pro")
    assert (pro.vision, pro.default_max_tokens, pro.context_window) == (True, 100_000, 1_000_000)
    million_out = TokenUsage(input_tokens=0, output_tokens=1_000_000)
    assert service.cost(
        "deepseek", "deepseek-v4-pro", million_out, beijing(2026, 10, 9, 10)
    ) == pytest.approx(4.0)
    assert service.cost(
        "deepseek", "deepseek-v4-pro", million_out, beijing(2026, 10, 2, 10)
    ) == pytest.approx(2.0)  # the holiday calendar still applies
    await run(service, prepared(service, "deepseek-v4-pro"))
    assert fake_llm.requests[-1].body["max_tokens"] == 100_000
