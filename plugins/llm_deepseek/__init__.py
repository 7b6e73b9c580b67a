"""DeepSeek models over DeepSeek's chat-completions API, with thinking mode.

Serves the provider route ``deepseek``. The endpoint is, first found: the ``base_url``
setting, ``$DEEPSEEK_BASE_URL``, ``https://api.deepseek.com``; so any DeepSeek-
compatible server or proxy can stand in. The key is read from the credential named
by ``api_key_env`` (``DEEPSEEK_API_KEY``) at each request, and sent only to the
endpoint the user's own settings and environment give (a project's cannot redirect
it). What dsh knows of each model (context window, output cap, vision, reasoning
efforts, prices with peak hours and the holiday calendar) is one table,
``models.toml`` beside this file; settings may override any of it per model. Legacy
ids the table names (``deepseek-v4-flash``) are sent as their successor
(``deepseek-flash``). Other model ids (``deepseek-reasoner``, dated ids...) pass
through unchanged, with no output cap sent; they take the same reasoning efforts, and
an effort chosen for one is sent with DeepSeek's ``thinking`` switch. Reasoning a
response carried goes back with every later request (``replay_reasoning = false``
turns that off, for a server that rejects the field). Every wait has a bound:
``headers_timeout`` (60 s) for the response headers, ``stream_idle_timeout`` (120 s)
for a silence of the stream, keep-alive comments breaking it (docs/settings.md).

Its setup form (the first run's screen) asks for a key and a model, and offers the
setup whenever DeepSeek is the configured provider and its key is nowhere to be found.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PositiveFloat

from dsh.credentials import KeyDestination, key_reader
from dsh.doctor import Check, DoctorAsk
from dsh.hooks import DOCTOR_CHECK
from dsh.kernel import Context, Plugin
from dsh.llm import Price, RetryPolicy
from dsh.services import CREDENTIALS, LLM, SETTINGS
from dsh.setup import ConnectionTest, ProviderSetup, SetupChoice
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter, ChatModel, connection_test
from dsh_plugins._shared.doctor_endpoint import endpoint_check

DEFAULT_BASE_URL = "https://api.deepseek.com"
HEADERS_TIMEOUT_S = 60.0
STREAM_IDLE_TIMEOUT_S = 120.0
BASE_URL_ENV = "DEEPSEEK_BASE_URL"
KEY_ENV = "DEEPSEEK_API_KEY"
PROVIDER = "deepseek"
PLUGIN = "llm-deepseek"

FACTS_FILE = Path(__file__).with_name("models.toml")


class Facts(BaseModel):
    """``models.toml``: the one table of what dsh knows about DeepSeek's models."""

    model_config = {"extra": "forbid"}

    default: str
    legacy: dict[str, str] = Field(default_factory=dict)
    """Old ids still accepted, and the id each is now served (and sent) as."""
    pricing: dict[str, Any] = Field(default_factory=dict)
    """Fields every model's price shares: off-peak factor, peak hours, holidays."""
    models: dict[str, dict[str, Any]]


UNKNOWN_MODEL = ChatModel(thinking=True, efforts=("off", "low", "high", "max"))
"""A model id not in the table: it takes the thinking switch when an effort is chosen;
without one, the server decides (DeepSeek's default is thinking on)."""


def load_facts(path: Path = FACTS_FILE) -> Facts:
    with path.open("rb") as file:
        raw = tomllib.load(file)
    pricing = raw.get("pricing", {})
    if "holidays" in pricing:
        pricing["off_peak_dates"] = pricing.pop("holidays")
    return Facts.model_validate(raw)


def known_models(facts: Facts) -> dict[str, ChatModel]:
    """Every model id the facts name, legacy ids included (sent as their successor)."""
    models: dict[str, ChatModel] = {}
    for model_id, fields in facts.models.items():
        price = fields.get("price")
        merged = {**fields, "price": {**facts.pricing, **price}} if price else fields
        models[model_id] = ChatModel.model_validate(merged)
    for old, new in facts.legacy.items():
        models[old] = models[new].model_copy(update={"sent_as": new})
    return models


FACTS = load_facts()
DEFAULT_MODEL = FACTS.default
DEFAULT_MODELS: dict[str, ChatModel] = known_models(FACTS)
FLASH_PRICE = DEFAULT_MODELS[DEFAULT_MODEL].price
"""The default model's price (what tests and docs quote)."""


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    base_url: str | None = None
    api_key_env: str = KEY_ENV
    models: dict[str, ChatModel] = Field(default_factory=dict)
    """Per-model overrides (context window, output cap, prices...) and extra models."""
    headers_timeout: PositiveFloat | None = None
    """Seconds from sending a request to its response headers, at most (default 60:
    DeepSeek answers at once, then sends keep-alive comments while a request waits)."""
    stream_idle_timeout: PositiveFloat | None = None
    """Seconds a stream may send nothing at all once the headers came (default 120:
    DeepSeek streams its reasoning as it thinks and keep-alives while it waits)."""
    read_timeout: PositiveFloat | None = None
    """The older setting: the default of both of the above."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    replay_reasoning: bool = True
    """Send reasoning back as ``reasoning_content``; false for a server rejecting it."""


def models_with(overrides: dict[str, ChatModel]) -> dict[str, ChatModel]:
    """The known models with the settings' overrides (and extra models) applied. A
    price set in settings replaces the table's price but keeps its peak hours and
    holiday calendar unless it sets those too."""
    models = dict(DEFAULT_MODELS)
    for name, override in overrides.items():
        merged = models[name].merged(override) if name in models else override
        if override.price is not None:
            own = override.price.model_dump(exclude_unset=True)
            merged = merged.model_copy(
                update={"price": Price.model_validate({**FACTS.pricing, **own})}
            )
        models[name] = merged
    return models


def apply(ctx: Context, config: Config) -> None:
    from_env = os.environ.get(BASE_URL_ENV)
    base_url = config.base_url or from_env or DEFAULT_BASE_URL
    adapter = ChatCompletionsAdapter(
        base_url=base_url,
        models=models_with(config.models),
        fallback=UNKNOWN_MODEL,
        replay_reasoning=config.replay_reasoning,
        api_key=key_reader(ctx.get(CREDENTIALS, None), config.api_key_env),
        credential=config.api_key_env,
        headers_timeout=config.headers_timeout or config.read_timeout or HEADERS_TIMEOUT_S,
        stream_idle_timeout=(
            config.stream_idle_timeout or config.read_timeout or STREAM_IDLE_TIMEOUT_S
        ),
        retry_policy=config.retry,
        key_destination=_key_destination(ctx, config, from_env),
    )
    ctx.get(LLM).register_adapter([PROVIDER], adapter)
    read_key = key_reader(ctx.get(CREDENTIALS, None), config.api_key_env)

    async def doctor(ask: DoctorAsk) -> list[Check]:
        if ask.provider != PROVIDER:
            return []  # not the provider in use: its endpoint is not asked
        return [await endpoint_check(PROVIDER, adapter, read_key, ask)]

    ctx.on(DOCTOR_CHECK, doctor)


def _key_destination(ctx: Context, config: Config, from_env: str | None) -> KeyDestination:
    """The key goes only where the user's own layers point, never to an address a
    project's settings chose, and only as the key they name."""
    settings = ctx.get(SETTINGS, None)
    if settings is None:  # loaded by a program, not from settings files: all its own
        return KeyDestination(config.base_url or from_env or DEFAULT_BASE_URL)
    own = settings.own_section("plugins", PLUGIN)
    if own.get("api_key_env", Config().api_key_env) != config.api_key_env:
        return KeyDestination(None)
    own_base_url = own.get("base_url") if isinstance(own.get("base_url"), str) else None
    return KeyDestination(own_base_url or from_env or DEFAULT_BASE_URL)


# ---------------------------------------------------------------------- setup


def _write_setup(choice: SetupChoice, key_ref: str | None, table: MutableMapping[str, Any]) -> None:
    if key_ref and key_ref != KEY_ENV:
        table["api_key_env"] = key_ref
    if choice.base_url:
        table["base_url"] = choice.base_url


def _connection_test(choice: SetupChoice, key: str | None, timeout_s: float) -> ConnectionTest:
    # Where the plugin would send it: the variable, else DeepSeek's own address.
    base_url = choice.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    return connection_test(SETUP, choice, key, timeout_s, base_url=base_url)


SETUP = ProviderSetup(
    id="deepseek",
    label="DeepSeek",
    table=PLUGIN,
    route=PROVIDER,
    key_env=KEY_ENV,
    models=tuple(FACTS.models),
    key_required=True,
    write=_write_setup,
    connect=_connection_test,
    configured_key=lambda table: str(table.get("api_key_env", KEY_ENV)),
)


plugin = Plugin(
    name=PLUGIN,
    description="DeepSeek models (V4.1 Flash, V4 Pro) with thinking mode",
    inject=(LLM,),
    optional=(CREDENTIALS, SETTINGS),
    config=Config,
    apply=apply,
    setup=SETUP,
)
