from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import ValidationError

from dsh.llm import (
    AssistantMessage,
    Block,
    CallId,
    FinishError,
    GenerateOptions,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    Message,
    ModelReasoning,
    ModelSource,
    PluginSource,
    ReasoningBlock,
    ReasoningEffortInfo,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultMessage,
    ToolSource,
    UnknownBlock,
    UnknownFinish,
    UnknownSource,
    UserMessage,
    content_blocks,
    finish_reasons,
    parse_message,
    tool_result,
    user_text,
)

# A message as the TypeScript original writes it in its logs.
ORIGINAL_ASSISTANT = {
    "id": "7d1c2f7e-0000-4000-8000-000000000001",
    "role": "assistant",
    "content": [
        {"type": "reasoning", "text": "The user wants the file."},
        {"type": "text", "text": "Reading it."},
        {"type": "tool-call", "id": "call_0", "name": "read", "arguments": '{"path":"a.py"}'},
    ],
    "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"},
}


def test_original_log_messages_parse_and_write_back_identically() -> None:
    message = parse_message(ORIGINAL_ASSISTANT)
    assert isinstance(message, AssistantMessage)
    assert message.tool_calls == (
        ToolCallBlock(id=CallId("call_0"), name="read", arguments='{"path":"a.py"}'),
    )
    assert message.reasoning == "The user wants the file."
    assert message.to_dict() == ORIGINAL_ASSISTANT


def test_json_uses_camel_case_and_omits_absent_fields() -> None:
    result = tool_result(CallId("call_1"), "42 lines", is_error=None)
    data = json.loads(result.to_json())
    assert data["source"] == {"kind": "tool", "callId": "call_1"}
    assert data["content"][0] == {
        "type": "tool-result",
        "toolCallId": "call_1",
        "content": [{"type": "text", "text": "42 lines"}],
    }
    usage = TokenUsage(input_tokens=10, output_tokens=5, cache_read_tokens=90)
    assert usage.to_dict() == {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 90}


def test_snake_case_names_are_accepted_too() -> None:
    block = ToolResultBlock.model_validate(
        {"type": "tool-result", "tool_call_id": "c", "content": []}
    )
    assert block.tool_call_id == "c"


def test_messages_are_immutable() -> None:
    message = user_text("hello")
    with pytest.raises(ValidationError):
        message.role = "assistant"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        message.content[0].text = "changed"  # type: ignore[misc]
    assert isinstance(message.content, tuple)


def test_message_ids_are_unique_uuids() -> None:
    assert user_text("a").id != user_text("a").id
    assert len(user_text("a").id) == 36


def test_a_tool_result_message_pairs_block_and_source() -> None:
    with pytest.raises(ValidationError, match="answers 'a'"):
        ToolResultMessage(
            content=(ToolResultBlock(tool_call_id=CallId("a"), content=()),),
            source=ToolSource(call_id=CallId("b")),
        )
    with pytest.raises(ValidationError, match="exactly one"):
        ToolResultMessage(content=(TextBlock(text="x"),), source=ToolSource(call_id=CallId("b")))
    assert tool_result(CallId("c"), "out").result.tool_call_id == "c"


def test_user_messages_refuse_model_and_tool_sources() -> None:
    with pytest.raises(ValidationError, match="model source"):
        UserMessage(content=(), source=ModelSource(provider="p", model="m"))
    injected = UserMessage(
        content=(TextBlock(text="<system-reminder>…</system-reminder>"),),
        source=PluginSource(plugin="agents-md", form="instructions"),
    )
    assert injected.source.kind == "plugin"


def test_plugin_sources_keep_extra_fields() -> None:
    source = PluginSource.model_validate(
        {"kind": "plugin", "plugin": "compact", "compactionId": "x"}
    )
    assert source.to_dict() == {"kind": "plugin", "plugin": "compact", "compactionId": "x"}


def test_parse_message_picks_the_specific_class() -> None:
    assert isinstance(parse_message(user_text("x").to_dict()), UserMessage)
    assert isinstance(parse_message(tool_result(CallId("c"), "r").to_dict()), ToolResultMessage)
    system = parse_message(
        {"role": "system", "content": [{"type": "text", "text": "s"}], "source": {"kind": "user"}}
    )
    assert type(system) is Message


def test_unknown_kinds_from_newer_versions_survive_a_round_trip() -> None:
    data = {
        "id": "m1",
        "role": "user",
        "content": [{"type": "image", "attachment": {"mime": "image/png"}}],
        "source": {"kind": "hook", "hook": "PreToolUse"},
    }
    message = parse_message(data)
    assert isinstance(message.content[0], UnknownBlock)
    assert isinstance(message.source, UnknownSource)
    assert message.to_dict() == data

    reason = finish_reasons.validate({"kind": "content-filter", "category": "x"})
    assert isinstance(reason, UnknownFinish)
    assert reason.to_dict() == {"kind": "content-filter", "category": "x"}


def test_malformed_blocks_are_clear_errors() -> None:
    with pytest.raises(ValidationError, match="needs a string 'type'"):
        Message.model_validate(
            {"role": "user", "content": [{"text": "x"}], "source": {"kind": "user"}}
        )
    with pytest.raises(ValidationError, match="must be an object"):
        Message.model_validate({"role": "user", "content": ["x"], "source": {"kind": "user"}})


def test_plugins_can_add_block_types_and_take_them_away() -> None:
    class CitationBlock(Block):
        type: Literal["citation"] = "citation"
        url: str

    unregister = content_blocks.register(CitationBlock)
    try:
        message = Message.model_validate(
            {
                "role": "user",
                "content": [{"type": "citation", "url": "https://example.org"}],
                "source": {"kind": "user"},
            }
        )
        assert message.content == (CitationBlock(url="https://example.org"),)
        with pytest.raises(ValueError, match="already registered"):
            content_blocks.register(CitationBlock)
    finally:
        unregister()
    assert "citation" not in content_blocks.tags
    with pytest.raises(ValueError, match="already registered"):
        content_blocks.register(TextBlock)


def test_token_usage_accounting() -> None:
    a = TokenUsage(input_tokens=100, output_tokens=50, cache_read_tokens=900, reasoning_tokens=20)
    b = TokenUsage(input_tokens=10, output_tokens=5)
    assert a.billed_input_tokens == 1000
    assert a.total_tokens == 1050
    total = a + b
    assert total == TokenUsage(
        input_tokens=110, output_tokens=55, cache_read_tokens=900, reasoning_tokens=20
    )
    assert (b + b).cache_read_tokens is None
    with pytest.raises(ValidationError):
        TokenUsage(input_tokens=-1, output_tokens=0)


def test_llm_error_carries_its_failure() -> None:
    failure = LlmFailure(
        message="slow down", code="RATE_LIMIT", status=429, provider_retry_after_ms=2000
    )
    error = LlmError(failure)
    assert error.code == "RATE_LIMIT"
    assert str(error) == "RATE_LIMIT: slow down"
    assert FinishError(failure=failure).to_dict()["failure"]["providerRetryAfterMs"] == 2000


def test_generate_options_never_serialize_the_signal() -> None:
    options = GenerateOptions(
        provider="deepseek",
        model="deepseek-v4-pro",
        messages=(user_text("hi"),),
        reasoning_effort="high",
        signal=object(),
    )
    assert "signal" not in options.to_dict()
    assert options.call_config == LlmCallConfig(
        provider="deepseek", model="deepseek-v4-pro", reasoning_effort="high"
    )


def test_model_reasoning_lists_accepted_efforts() -> None:
    reasoning = ModelReasoning(
        efforts=(
            ReasoningEffortInfo(id="low", name="Low"),
            ReasoningEffortInfo(id="high", name="High"),
        ),
        default_effort="high",
    )
    assert reasoning.accepts("low")
    assert not reasoning.accepts("medium")


def test_reasoning_and_text_blocks_are_distinct() -> None:
    assert ReasoningBlock(text="x") != TextBlock(text="x")
