"""What a plugin is: a name, the services it needs and provides, a config model, and ``apply``.

A plugin module (in the bundled ``plugins`` package, or any package named by a
``dsh.plugins`` entry point) exposes one as ``plugin``::

    from dsh.kernel import Context, Plugin, ServiceKey

    GREETER: ServiceKey[Greeter] = ServiceKey("greeter")

    class Config(BaseModel):
        greeting: str = "hello"

    def apply(ctx: Context, config: Config) -> None:
        ctx.provide(GREETER, Greeter(config.greeting))

    plugin = Plugin(name="greeter", provides=(GREETER,), config=Config, apply=apply)

``apply`` runs on a context of the plugin's own; everything it registers there is
undone, newest first, when the plugin unloads.

A plugin whose records mean something of their own (session event types, how they
show in a transcript, the purposes of its model calls) registers them in
``vocabulary(ctx)``, not in ``apply``: it runs first on the same context when the
plugin loads, and alone where dsh only reads sessions (``dsh sessions show``,
``reindex``), so a log reads the same there. It takes no config and starts nothing.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from dsh.kernel.context import ServiceKey
from dsh.kernel.errors import PluginDefinitionError

PLUGIN_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


class NoConfig(BaseModel):
    """The config model of a plugin that takes no settings; unknown keys are refused."""

    model_config = {"extra": "forbid"}


class CliHost(Protocol):
    """What the command line offers a plugin's command."""

    def runtime(self) -> AbstractAsyncContextManager[Any]:
        """A runtime for this folder, as ``dsh -p`` would start one (settings read, the
        project's trust as decided, every plugin loaded), closed on exit: ``async with
        host.runtime() as root:`` gives its root context (``root.get(SETTINGS)``)."""
        ...


@dataclass(frozen=True)
class CliCommand:
    """A command a plugin adds to the command line: ``dsh NAME ACTION ...``.

    ``configure`` adds its arguments to the ``argparse`` parser made for it; ``run``
    gets what was parsed and a :class:`CliHost`, and returns the exit status. It runs in a plain process: no
    runtime is started for it (it may start one), no session is open. A plugin
    command is tried only for a command line a prompt cannot be (``dsh NAME WORD``:
    two words, the first no core command), so ``dsh NAME`` alone is still a prompt."""

    name: str
    help: str
    configure: Callable[[Any], None]
    run: Callable[[Any, CliHost], int]

    def __post_init__(self) -> None:
        if not PLUGIN_NAME.match(self.name):
            raise PluginDefinitionError(
                f"command name {self.name!r} must match {PLUGIN_NAME.pattern}"
            )


@dataclass(frozen=True)
class Plugin:
    name: str
    apply: Callable[[Any, Any], Awaitable[None] | None]
    inject: tuple[ServiceKey[Any], ...] = ()
    """Services the plugin needs; it is skipped when one is unavailable."""
    optional: tuple[ServiceKey[Any], ...] = ()
    """Services it uses when present: they only order loading."""
    provides: tuple[ServiceKey[Any], ...] = ()
    """Services it provides; loading checks that it really does."""
    config: type[BaseModel] = field(default=NoConfig)
    description: str = ""
    setup: object | None = None
    """A provider plugin's first-run setup form, a :class:`dsh.setup.ProviderSetup`. It is
    read before any plugin is applied (the setup comes before the runtime), so it is
    declared here rather than registered by ``apply``."""
    vocabulary: Callable[[Any], None] | None = None
    """Registers what the plugin's records mean, and nothing else (see above)."""
    cli: tuple[CliCommand, ...] = ()
    """Commands it adds to the command line (:class:`CliCommand`), read without applying it."""

    def __post_init__(self) -> None:
        if not PLUGIN_NAME.match(self.name):
            raise PluginDefinitionError(
                f"plugin name {self.name!r} must match {PLUGIN_NAME.pattern}"
            )
        if not callable(self.apply):
            raise PluginDefinitionError(f"plugin {self.name!r}: apply is not callable")
        if self.vocabulary is not None and not callable(self.vocabulary):
            raise PluginDefinitionError(f"plugin {self.name!r}: vocabulary is not callable")
        if not (isinstance(self.config, type) and issubclass(self.config, BaseModel)):
            raise PluginDefinitionError(
                f"plugin {self.name!r}: config must be a pydantic model class"
            )
        for group in ("inject", "optional", "provides"):
            value = getattr(self, group)
            if not isinstance(value, tuple) or not all(isinstance(v, ServiceKey) for v in value):
                raise PluginDefinitionError(
                    f"plugin {self.name!r}: {group} must be a tuple of ServiceKeys "
                    "(the core's are in dsh.services)"
                )
