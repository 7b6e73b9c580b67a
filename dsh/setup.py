"""First run: choosing a provider, giving it a key, and checking that it answers.

The providers to choose from are the provider plugins' own: each declares its form as
``Plugin(setup=ProviderSetup(...))``, what the setup asks for it (a name to show, the
fields beyond the model and the key, the models to suggest), the settings table it
writes, and the adapter a connection test asks. The form is read from the plugin
before any plugin is applied, so the setup runs before the runtime starts.

With no usable credential for the configured provider, the TUI shows its setup screen
(built on this module) instead of failing at the first request; headless runs print
how to configure and exit. A setup writes the choice into the user's settings
document, and the key (if one was pasted) into the credential store: a 0600 file,
never the settings. A key can also stay in the environment: the setup then records
only the variable's name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dsh import held_secrets
from dsh.credentials import CredentialStore, Secret, check_ref
from dsh.kernel import Candidate, discover
from dsh.llm import GenerateOptions, LlmAdapter, LlmError, user_text
from dsh.paths import USER_FILE
from dsh.settings import Settings, write_private

_log = logging.getLogger("dsh.setup")

SetupAnswer = Literal["base_url", "name"]
"""The answers a form may ask for beyond the model and the key: where the provider is,
and the name of the provider route it makes."""


class SetupError(ValueError):
    """A setup that cannot be used; the message says what to change."""


@dataclass(frozen=True)
class SetupChoice:
    """What the person chose and typed."""

    kind: str
    """The chosen provider form's :attr:`ProviderSetup.id`."""
    model: str
    base_url: str | None = None
    """The server, such as ``http://127.0.0.1:11434/v1``, for a form that asks for it."""
    name: str = "custom"
    """The provider route's name, for a form whose route the person names."""
    key: Secret | None = None
    """A pasted key, stored in the credential file."""
    key_env: str | None = None
    """Or the environment variable that holds the key."""


@dataclass(frozen=True)
class SetupField:
    """A text field a provider's form shows beyond the model and the key."""

    answer: SetupAnswer
    """The part of the :class:`SetupChoice` it fills."""
    label: str
    placeholder: str = ""
    default: str = ""


@dataclass(frozen=True)
class ConnectionTest:
    """What a connection test asks: an adapter made for the test alone (closed after
    it), and the address it asks, for the message when nothing answers."""

    adapter: LlmAdapter
    address: str


@dataclass(frozen=True)
class ProviderSetup:
    """A provider plugin's setup form: offered as ``Plugin.setup``."""

    id: str
    """Names the choice among the forms (and its widget on the setup screen)."""
    label: str
    """The choice as the person reads it: ``DeepSeek``."""
    table: str
    """The plugin whose ``[plugins.<table>]`` settings table :attr:`write` fills."""
    key_env: str
    """The variable a pasted key is stored as, unless the person names another."""
    write: Callable[[SetupChoice, str | None, MutableMapping[str, Any]], None]
    """Put the choice into the table (a ``tomlkit`` table, layout kept), given the name
    the key is read by (None: no key)."""
    connect: Callable[[SetupChoice, str | None, float], ConnectionTest]
    """What a connection test asks, given the key (None: none) and the seconds the test
    may take."""
    route: str | None = None
    """The provider route the plugin serves; None: the one the person names."""
    models: tuple[str, ...] = ()
    """Model ids to suggest; the first is filled in."""
    fields: tuple[SetupField, ...] = ()
    key_required: bool = False
    """Whether the provider answers nothing without a key."""
    check: Callable[[SetupChoice], None] | None = None
    """Refuse answers the plugin cannot use, raising :class:`SetupError`."""
    configured_key: Callable[[Mapping[str, Any]], str] | None = None
    """For a form with a fixed ``route``: the credential the plugin's configured table
    reads. A start whose provider is that route and finds no such key shows the setup."""

    def provider(self, choice: SetupChoice) -> str:
        """The provider route the choice configures."""
        return self.route or choice.name

    def key_ref(self, choice: SetupChoice) -> str | None:
        """The name the key is read by: the variable named, else where a pasted key is
        stored; None without a key."""
        if choice.key_env:
            return choice.key_env
        if choice.key is not None:
            return self.key_env
        return None

    def answers(self) -> tuple[SetupAnswer, ...]:
        return tuple(field.answer for field in self.fields)


def setup_forms(
    candidates: Iterable[Candidate] | None = None, *, disabled: Iterable[str] = ()
) -> list[ProviderSetup]:
    """The forms the plugins declare (discovered unless ``candidates`` is given), in
    discovery order, without those of ``disabled`` plugins."""
    off = set(disabled)
    forms: dict[str, ProviderSetup] = {}
    for candidate in discover() if candidates is None else candidates:
        plugin = candidate.plugin
        if plugin is None or plugin.name in off or plugin.setup is None:
            continue
        form = plugin.setup
        if not isinstance(form, ProviderSetup):
            _log.warning("plugin %s: its setup is not a dsh.setup.ProviderSetup", plugin.name)
        elif form.id in forms:
            _log.warning("plugin %s: a setup form %r is already offered", plugin.name, form.id)
        else:
            forms[form.id] = form
    return list(forms.values())


def configured_forms(settings: Settings) -> list[ProviderSetup]:
    """The forms of the plugins these settings load."""
    return setup_forms(discover(settings.plugin_modules()), disabled=settings.disabled_plugins())


def form_for(choice: SetupChoice, forms: Sequence[ProviderSetup] | None = None) -> ProviderSetup:
    for form in setup_forms() if forms is None else forms:
        if form.id == choice.kind:
            return form
    raise SetupError(f"no provider plugin offers a setup named {choice.kind!r}")


def check_choice(choice: SetupChoice, forms: Sequence[ProviderSetup] | None = None) -> None:
    """Raise :class:`SetupError` for a choice that cannot be used."""
    form = form_for(choice, forms)
    if not choice.model.strip():
        raise SetupError("choose a model")
    if form.check is not None:
        form.check(choice)
    if form.key_required and choice.key is None and not choice.key_env:
        raise SetupError(f"{form.label} needs a key: paste one, or name the variable that holds it")
    if choice.key_env:
        try:
            check_ref(choice.key_env)
        except ValueError as error:
            raise SetupError(str(error)) from None


def needs_setup(
    settings: Settings,
    credentials: CredentialStore,
    forms: Sequence[ProviderSetup] | None = None,
) -> bool:
    """True when the configured provider is one a form serves by a fixed route and no
    key for it is found. Another route's own plugin says what it needs at the first call."""
    provider = settings.agent.provider
    for form in configured_forms(settings) if forms is None else forms:
        if form.route != provider or form.configured_key is None:
            continue
        ref = form.configured_key(settings.section("plugins", form.table))
        # A key only in the .env of a folder not trusted: the first call says so, and
        # how to have it read; the setup screen would ask for a key the user has.
        return credentials.resolve(ref) is None and credentials.withheld(ref) is None
    return False


def save_setup(
    home: Path,
    credentials: CredentialStore,
    choice: SetupChoice,
    forms: Sequence[ProviderSetup] | None = None,
) -> Path:
    """Write the choice into the user's settings and the key into the credential file.
    Returns the settings document's path."""
    import tomlkit

    form = form_for(choice, forms)
    check_choice(choice, [form])
    key_ref = form.key_ref(choice)
    if choice.key is not None and key_ref is not None:
        credentials.set(key_ref, choice.key)
    path = home / USER_FILE
    document = (
        tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
    )
    agent = document.setdefault("agent", tomlkit.table())
    agent["provider"] = form.provider(choice)
    agent["model"] = choice.model
    plugins = document.setdefault("plugins", tomlkit.table())
    form.write(choice, key_ref, plugins.setdefault(form.table, tomlkit.table()))
    write_private(path, tomlkit.dumps(document))
    return path


async def check_connection(
    choice: SetupChoice,
    *,
    timeout_s: float = 20.0,
    forms: Sequence[ProviderSetup] | None = None,
) -> str | None:
    """Ask the chosen model for one token. None when it answered; else why not."""
    try:
        form = form_for(choice, forms)
        check_choice(choice, [form])
    except SetupError as error:
        return str(error)
    key = choice.key.reveal() if choice.key is not None else None
    if key is None and choice.key_env:
        key = held_secrets.value_of(choice.key_env)
        if key is None:
            return f"{choice.key_env} is not set in this environment"
    try:
        test = form.connect(choice, key, timeout_s)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    options = GenerateOptions(
        provider=form.provider(choice),
        model=choice.model,
        messages=(user_text("Reply with the word OK."),),
        max_tokens=1,
    )
    try:
        async with asyncio.timeout(timeout_s):
            async for _ in test.adapter.stream(options):
                break
    except LlmError as error:
        return error.failure.message
    except TimeoutError:
        return f"no answer from {test.address} within {timeout_s:g} s"
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    finally:
        await test.adapter.aclose()
    return None
