"""First run: choosing a provider, giving it a key, and checking that it answers.

With no usable credential for the configured provider, the TUI shows its setup screen
(built on this module) instead of failing at the first request; headless runs print
how to configure and exit. A setup writes the choice into the user's settings
document, and the key (if one was pasted) into the credential store: a 0600 file,
never the settings. A key can also stay in the environment: the setup then records
only the variable's name.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh.credentials import CredentialStore, Secret, check_ref
from dsh.settings import USER_FILE, Settings, write_private

DEEPSEEK_KEY = "DEEPSEEK_API_KEY"
DEEPSEEK_MODELS = ("deepseek-v4-flash", "deepseek-v4-pro")
DEEPSEEK_URL = "https://api.deepseek.com"
CUSTOM_KEY = "OPENAI_COMPAT_API_KEY"


class SetupError(ValueError):
    """A setup that cannot be used; the message says what to change."""


@dataclass(frozen=True)
class SetupChoice:
    kind: Literal["deepseek", "openai-compat"]
    model: str
    base_url: str | None = None
    """For ``openai-compat``: the server, such as ``http://127.0.0.1:11434/v1``."""
    name: str = "custom"
    """For ``openai-compat``: the provider route's name."""
    key: Secret | None = None
    """A pasted key, stored in the credential file."""
    key_env: str | None = None
    """Or the environment variable that holds the key."""

    @property
    def provider(self) -> str:
        return "deepseek" if self.kind == "deepseek" else self.name

    @property
    def key_ref(self) -> str | None:
        """Where the key is read from, by name."""
        if self.key_env:
            return self.key_env
        if self.key is not None:
            return DEEPSEEK_KEY if self.kind == "deepseek" else CUSTOM_KEY
        return None

    def check(self) -> None:
        if not self.model.strip():
            raise SetupError("choose a model")
        if self.kind == "openai-compat":
            if not self.base_url or not self.base_url.startswith(("http://", "https://")):
                raise SetupError("the base URL must start with http:// or https://")
            if not self.name.replace("-", "").replace("_", "").isalnum():
                raise SetupError("the provider name may hold letters, digits, - and _")
        elif self.key is None and not self.key_env:
            raise SetupError("DeepSeek needs a key: paste one, or name the variable that holds it")
        if self.key_env:
            try:
                check_ref(self.key_env)
            except ValueError as error:
                raise SetupError(str(error)) from None


def needs_setup(settings: Settings, credentials: CredentialStore) -> bool:
    """True when the configured provider is DeepSeek and no key for it is found."""
    agent = settings.section("agent")
    provider = agent.get("provider", "deepseek")
    if provider != "deepseek":
        return False  # another route: its own plugin says what it needs at the first call
    ref = str(settings.section("plugins", "llm-deepseek").get("api_key_env", DEEPSEEK_KEY))
    # A key only in the .env of a folder not trusted: the first call says so, and how
    # to have it read; the setup screen would ask for a key the user has.
    return credentials.resolve(ref) is None and credentials.withheld(ref) is None


def save_setup(home: Path, credentials: CredentialStore, choice: SetupChoice) -> Path:
    """Write the choice into the user's settings and the key into the credential file.
    Returns the settings document's path."""
    import tomlkit

    choice.check()
    if choice.key is not None and choice.key_ref is not None:
        credentials.set(choice.key_ref, choice.key)
    path = home / USER_FILE
    document = (
        tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
    )
    agent = document.setdefault("agent", tomlkit.table())
    agent["provider"] = choice.provider
    agent["model"] = choice.model
    plugins = document.setdefault("plugins", tomlkit.table())
    if choice.kind == "deepseek":
        table = plugins.setdefault("llm-deepseek", tomlkit.table())
        if choice.key_ref and choice.key_ref != DEEPSEEK_KEY:
            table["api_key_env"] = choice.key_ref
        if choice.base_url:
            table["base_url"] = choice.base_url
    else:
        table = plugins.setdefault("llm-openai-compat", tomlkit.table())
        providers = [p for p in table.get("providers", []) if dict(p).get("name") != choice.name]
        entry = tomlkit.inline_table()
        entry.update({"name": choice.name, "base_url": choice.base_url or ""})
        if choice.key_ref:
            entry["api_key_env"] = choice.key_ref
        providers.append(entry)
        table["providers"] = providers
    write_private(path, tomlkit.dumps(document))
    return path


async def check_connection(choice: SetupChoice, *, timeout_s: float = 20.0) -> str | None:
    """Ask the chosen model for one token. None when it answered; else why not."""
    import os

    from dsh.llm import GenerateOptions, LlmError, user_text
    from dsh.llm.chat_completions import ChatCompletionsAdapter, ChatModel

    try:
        choice.check()
    except SetupError as error:
        return str(error)
    key = choice.key.reveal() if choice.key is not None else None
    if key is None and choice.key_env:
        key = os.environ.get(choice.key_env) or None
        if key is None:
            return f"{choice.key_env} is not set in this environment"
    # As the DeepSeek plugin would: the variable, else DeepSeek's own address.
    base_url = choice.base_url or os.environ.get("DEEPSEEK_BASE_URL") or DEEPSEEK_URL
    adapter = ChatCompletionsAdapter(
        base_url=base_url,
        models={},
        fallback=ChatModel(),
        api_key=lambda: key,
        credential=choice.key_ref,
        key_required=choice.kind == "deepseek",
        read_timeout=timeout_s,
        connect_timeout=min(timeout_s, 10.0),
        list_models_path=None,
    )
    options = GenerateOptions(
        provider=choice.provider,
        model=choice.model,
        messages=(user_text("Reply with the word OK."),),
        max_tokens=1,
    )
    try:
        async with asyncio.timeout(timeout_s):
            async for _ in adapter.stream(options):
                break
    except LlmError as error:
        return error.failure.message
    except TimeoutError:
        return f"no answer from {base_url} within {timeout_s:g} s"
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    finally:
        await adapter.aclose()
    return None
