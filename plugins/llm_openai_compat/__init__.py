"""Any OpenAI-compatible chat-completions server: Ollama, vLLM, llama.cpp, gateways.

Each configured provider gets a route of its own, so several can be used at once::

    [plugins.llm-openai-compat]
    providers = [
      { name = "ollama", base_url = "http://127.0.0.1:11434/v1" },
      { name = "gateway", base_url = "https://llm.example.com/v1",
        api_key_env = "GATEWAY_API_KEY", headers = { "X-Team" = "tools" } },
    ]

Models are listed from the server's ``/models`` when it has one; any model id is
accepted. Reasoning a response carried (``reasoning_content`` or ``reasoning``) goes
back as ``reasoning_content`` with every later request, unless the provider sets
``replay_reasoning = false``. A provider without ``api_key_env`` sends no key; one with it sends the key
only to the ``base_url`` the user's own settings give that provider. ``headers_timeout``
and ``stream_idle_timeout`` (300 s each) bound the waits (docs/settings.md).

Its setup form (the first run's screen) asks for the server, a name for its route, a
model and optionally a key, and adds that provider to the list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydantic import BaseModel, Field, PositiveFloat, field_validator

from dsh.credentials import KeyDestination, key_reader
from dsh.doctor import Check, DoctorAsk
from dsh.hooks import DOCTOR_CHECK
from dsh.kernel import Context, Plugin
from dsh.llm import RetryPolicy
from dsh.services import CREDENTIALS, LLM, SETTINGS
from dsh.setup import ConnectionTest, ProviderSetup, SetupChoice, SetupError, SetupField
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter, ChatModel, connection_test
from dsh_plugins._shared.doctor_endpoint import endpoint_check

PLUGIN = "llm-openai-compat"
KEY_ENV = "OPENAI_COMPAT_API_KEY"
WAIT_S = 300.0
"""The default of both waits: what Codex CLI gives a silent stream."""
"""Where the setup stores a pasted key, unless the person names another variable."""


class Provider(BaseModel):
    model_config = {"extra": "forbid"}

    name: str
    base_url: str
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    models: dict[str, ChatModel] = Field(default_factory=dict)
    list_models: bool = True
    headers_timeout: PositiveFloat | None = None
    """Seconds from sending a request to its response headers, at most (default 300: a
    local server may load the model and read the whole prompt before it answers)."""
    stream_idle_timeout: PositiveFloat | None = None
    """Seconds a stream may send nothing at all once the headers came (default 300: a
    reasoning model that streams nothing of its thinking may be silent for minutes)."""
    read_timeout: PositiveFloat | None = None
    """The older setting: the default of both of the above."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    replay_reasoning: bool = True
    """Send reasoning back as ``reasoning_content``; false for a server rejecting it."""

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
    settings = ctx.get(SETTINGS, None)
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
                key_reader(ctx.get(CREDENTIALS, None), provider.api_key_env)
                if provider.api_key_env
                else None
            ),
            credential=provider.api_key_env,
            key_required=provider.api_key_env is not None,
            headers=provider.headers,
            headers_timeout=provider.headers_timeout or provider.read_timeout or WAIT_S,
            stream_idle_timeout=provider.stream_idle_timeout or provider.read_timeout or WAIT_S,
            retry_policy=provider.retry,
            list_models_path="/models" if provider.list_models else None,
            replay_reasoning=provider.replay_reasoning,
            key_destination=_key_destination(provider, own.get(provider.name)),
        )
        ctx.get(LLM).register_adapter([provider.name], adapter)
        ctx.on(DOCTOR_CHECK, _doctor(ctx, provider, adapter))


def _doctor(
    ctx: Context, provider: Provider, adapter: ChatCompletionsAdapter
) -> Callable[[DoctorAsk], Awaitable[list[Check]]]:
    """The check of ``provider``'s endpoint, when it is the provider in use."""

    def no_key() -> str | None:
        return None

    read_key = (
        key_reader(ctx.get(CREDENTIALS, None), provider.api_key_env)
        if provider.api_key_env
        else no_key
    )

    async def doctor(ask: DoctorAsk) -> list[Check]:
        if ask.provider != provider.name:
            return []
        path = "/models" if provider.list_models else None
        return [
            await endpoint_check(
                provider.name, adapter, read_key, ask, headers=provider.headers, models_path=path
            )
        ]

    return doctor


def _key_destination(provider: Provider, own: Provider | None) -> KeyDestination:
    """The key goes to the provider's address as the user's own layers give it, and
    only when they name the same key: a project can neither redirect a key nor have
    another provider's key sent to this one."""
    if own is None or own.api_key_env != provider.api_key_env:
        return KeyDestination(None)
    return KeyDestination(own.base_url)


# ---------------------------------------------------------------------- setup


def _check_setup(choice: SetupChoice) -> None:
    if not choice.base_url or not choice.base_url.startswith(("http://", "https://")):
        raise SetupError("the base URL must start with http:// or https://")
    if not choice.name.replace("-", "").replace("_", "").isalnum():
        raise SetupError("the provider name may hold letters, digits, - and _")


def _write_setup(choice: SetupChoice, key_ref: str | None, table: MutableMapping[str, Any]) -> None:
    """The provider goes into ``providers``, replacing one of the same name."""
    import tomlkit  # only a setup writes settings: not imported when the plugin loads

    providers = [p for p in table.get("providers", []) if dict(p).get("name") != choice.name]
    entry = tomlkit.inline_table()
    entry.update({"name": choice.name, "base_url": choice.base_url or ""})
    if key_ref:
        entry["api_key_env"] = key_ref
    providers.append(entry)
    table["providers"] = providers


def _connection_test(choice: SetupChoice, key: str | None, timeout_s: float) -> ConnectionTest:
    return connection_test(SETUP, choice, key, timeout_s, base_url=choice.base_url or "")


SETUP = ProviderSetup(
    id="openai-compat",
    label="Any OpenAI-compatible endpoint",
    table=PLUGIN,
    key_env=KEY_ENV,
    fields=(
        SetupField("base_url", "Base URL", placeholder="http://127.0.0.1:11434/v1"),
        SetupField("name", "Provider name", default="custom"),
    ),
    check=_check_setup,
    write=_write_setup,
    connect=_connection_test,
)


plugin = Plugin(
    name=PLUGIN,
    description="OpenAI-compatible servers (Ollama, vLLM, llama.cpp, gateways)",
    inject=(LLM,),
    optional=(CREDENTIALS, SETTINGS),
    config=Config,
    apply=apply,
    setup=SETUP,
)
