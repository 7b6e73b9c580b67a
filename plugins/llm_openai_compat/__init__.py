"""Any OpenAI-compatible chat-completions server: Ollama, vLLM, llama.cpp, gateways.

Each configured provider gets a route of its own, so several can be used at once::

    [plugins.llm-openai-compat]
    providers = [
      { name = "ollama", base_url = "http://127.0.0.1:11434/v1" },
      { name = "gateway", base_url = "https://llm.example.com/v1",
        api_key_env = "GATEWAY_API_KEY", headers = { "X-Team" = "tools" } },
    ]

Models are listed from the server's ``/models`` when it has one; any model id is
accepted. A provider without ``api_key_env`` sends no key; one with it sends the key
only to the ``base_url`` the user's own settings give that provider.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveFloat, field_validator

from dsh.credentials import KeyDestination, key_reader
from dsh.kernel import Context, Plugin
from dsh.llm import RetryPolicy
from dsh.llm.chat_completions import ChatCompletionsAdapter, ChatModel

PLUGIN = "llm-openai-compat"


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


def _own_providers(ctx: Context, config: Config) -> dict[str, Provider]:
    """The providers as the user's own layers configure them (not a project's)."""
    settings = ctx.get("settings", None)
    if settings is None:  # loaded by a program, not from settings files: all its own
        return {provider.name: provider for provider in config.providers}
    try:
        own = Config.model_validate(settings.own_section("plugins", PLUGIN))
    except ValueError:
        return {}
    return {provider.name: provider for provider in own.providers}


def apply(ctx: Context, config: Config) -> None:
    seen: set[str] = set()
    own = _own_providers(ctx, config)
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
            key_destination=_key_destination(provider, own.get(provider.name)),
        )
        ctx.llm.register_adapter([provider.name], adapter)


def _key_destination(provider: Provider, own: Provider | None) -> KeyDestination:
    """The key goes to the provider's address as the user's own layers give it, and
    only when they name the same key: a project can neither redirect a key nor have
    another provider's key sent to this one."""
    if own is None or own.api_key_env != provider.api_key_env:
        return KeyDestination(None)
    return KeyDestination(own.base_url)


plugin = Plugin(
    name=PLUGIN,
    description="OpenAI-compatible servers (Ollama, vLLM, llama.cpp, gateways)",
    inject=("llm",),
    optional=("credentials", "settings"),
    config=Config,
    apply=apply,
)
