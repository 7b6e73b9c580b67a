"""Any OpenAI-compatible chat-completions server: Ollama, vLLM, llama.cpp, gateways.

Each configured provider gets a route of its own, so several can be used at once::

    [plugins.llm-openai-compat]
    providers = [
      { name = "ollama", base_url = "http://127.0.0.1:11434/v1" },
      { name = "gateway", base_url = "https://llm.example.com/v1",
        api_key_env = "GATEWAY_API_KEY", headers = { "X-Team" = "tools" } },
    ]

Models are listed from the server's ``/models`` when it has one; any model id is
accepted. A provider without ``api_key_env`` sends no key.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveFloat, field_validator

from dsh.credentials import key_reader
from dsh.kernel import Context, Plugin
from dsh.llm import RetryPolicy
from dsh.llm.chat_completions import ChatCompletionsAdapter, ChatModel


class Provider(BaseModel):
    model_config = {"extra": "forbid"}

    name: str
    base_url: str
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    models: dict[str, ChatModel] = Field(default_factory=dict)
    list_models: bool = True
    read_timeout: PositiveFloat = 300.0
    retry: RetryPolicy = Field(default_factory=RetryPolicy)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    providers: list[Provider] = Field(default_factory=list)


def apply(ctx: Context, config: Config) -> None:
    seen: set[str] = set()
    for provider in config.providers:
        if provider.name in seen:
            raise ValueError(f"provider {provider.name!r} is configured twice")
        seen.add(provider.name)
        adapter = ChatCompletionsAdapter(
            base_url=provider.base_url,
            models=provider.models,
            api_key=(
                key_reader(ctx.get("credentials", None), provider.api_key_env)
                if provider.api_key_env
                else None
            ),
            credential=provider.api_key_env,
            key_required=provider.api_key_env is not None,
            headers=provider.headers,
            read_timeout=provider.read_timeout,
            retry_policy=provider.retry,
            list_models_path="/models" if provider.list_models else None,
        )
        ctx.llm.register_adapter([provider.name], adapter)


plugin = Plugin(
    name="llm-openai-compat",
    description="OpenAI-compatible servers (Ollama, vLLM, llama.cpp, gateways)",
    inject=("llm",),
    optional=("credentials",),
    config=Config,
    apply=apply,
)
