"""The OpenAI-compatible adapter over real HTTP against scripted servers."""

from __future__ import annotations

from typing import Any

import pytest

from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.llm import (
    AssistantMessage,
    GenerateOptions,
    LlmService,
    ModelSource,
    ReasoningBlock,
    TextBlock,
    assemble,
    user_text,
)
from dsh.services import LLM
from dsh.testing import FakeLLM, Reply, Script
from dsh_plugins.llm_openai_compat import plugin as compat_plugin


async def load(**config: Any) -> tuple[LlmService, list[Any]]:
    root = Context()
    service = LlmService(root)
    root.provide(LLM, service)
    records = await PluginHost(root).load(
        [Candidate("llm-openai-compat", "test", plugin=compat_plugin)],
        configs={"llm-openai-compat": config},
    )
    return service, records


async def ask(service: LlmService, provider: str, model: str = "any-model", **fields: Any) -> Any:
    fields.setdefault("messages", (user_text("hello"),))
    options = GenerateOptions(provider=provider, model=model, **fields)
    return assemble([c async for c in service.stream(options)])


async def test_several_providers_at_once_each_with_its_own_key_and_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "gw-secret")
    async with (
        FakeLLM(Script(replies=[Reply(text="from ollama")])) as ollama,
        FakeLLM(
            Script(replies=[Reply(text="from the gateway")], require_key="gw-secret")
        ) as gateway,
    ):
        service, [record] = await load(
            providers=[
                {"name": "ollama", "base_url": ollama.base_url + "/v1"},
                {
                    "name": "gateway",
                    "base_url": gateway.base_url + "/v1",
                    "api_key_env": "GATEWAY_KEY",
                    "headers": {"X-Team": "tools"},
                },
            ]
        )
        assert record.status is PluginStatus.LOADED
        assert service.providers() == ["gateway", "ollama"]
        assert (await ask(service, "ollama", "llama3.2")).content == (
            TextBlock(text="from ollama"),
        )
        assert (await ask(service, "gateway")).content == (TextBlock(text="from the gateway"),)
        assert "authorization" not in ollama.requests[-1].headers
        assert ollama.requests[-1].path == "/v1/chat/completions"
        assert gateway.requests[-1].headers["authorization"] == "Bearer gw-secret"
        assert gateway.requests[-1].headers["x-team"] == "tools"


async def test_models_are_listed_from_the_server(fake_llm: FakeLLM) -> None:
    service, _ = await load(
        providers=[
            {
                "name": "vllm",
                "base_url": fake_llm.base_url + "/v1",
                "models": {"local-coder": {"context_window": 32768}},
            },
            {"name": "quiet", "base_url": "http://127.0.0.1:9/v1", "list_models": False},
        ]
    )
    listed = {m.id for m in await service.list_models("vllm")}
    assert {"deepseek-flash", "deepseek-v4-pro", "local-coder"} <= listed
    assert await service.list_models("quiet") == []
    assert service.resolve("vllm", "local-coder").context_window == 32768


@pytest.mark.parametrize("replay", [True, False])
async def test_reasoning_a_response_carried_goes_back_unless_turned_off(
    fake_llm: FakeLLM, replay: bool
) -> None:
    fake_llm.add(Reply(reasoning="thinking", text="answer"))
    fake_llm.add(Reply(text="next"))
    provider = {"name": "local", "base_url": fake_llm.base_url, "replay_reasoning": replay}
    service, _ = await load(providers=[provider])
    first = await ask(service, "local", temperature=0.5)
    assert first.content == (ReasoningBlock(text="thinking"), TextBlock(text="answer"))
    assert fake_llm.requests[-1].body["temperature"] == 0.5  # thinking not known to be on
    history = (
        user_text("hello"),
        AssistantMessage(
            content=first.content, source=ModelSource(provider="local", model="any-model")
        ),
        user_text("and?"),
        AssistantMessage(
            content=(TextBlock(text="a second answer"),),
            source=ModelSource(provider="local", model="any-model"),
        ),
        user_text("more?"),
    )
    await ask(service, "local", messages=history, temperature=0.5)
    sent = fake_llm.requests[-1].body
    assistants = [m for m in sent["messages"] if m["role"] == "assistant"]
    if replay:
        # The conversation shows a thinking model: every assistant message carries it.
        assert [m["reasoning_content"] for m in assistants] == ["thinking", ""]
        assert "temperature" not in sent
    else:
        assert all("reasoning_content" not in m for m in sent["messages"])
    assert "thinking" not in sent


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"providers": [{"name": "x", "base_url": "ftp://nope"}]}, "http:// or https://"),
        (
            {
                "providers": [
                    {"name": "x", "base_url": "http://a"},
                    {"name": "x", "base_url": "http://b"},
                ]
            },
            "configured twice",
        ),
        ({"providers": [{"name": "x"}]}, "base_url"),
    ],
)
async def test_bad_configuration_is_reported_by_name(config: dict[str, Any], error: str) -> None:
    _, [record] = await load(**config)
    assert record.status is PluginStatus.FAILED
    assert error in str(record.error)
