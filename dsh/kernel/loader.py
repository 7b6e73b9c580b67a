"""Finding plugins and loading them in dependency order.

Discovery never raises: a module that fails to import, or an entry point that names
no plugin, becomes a :class:`Candidate` carrying its error, and reaches the report as
a failed plugin. Loading orders plugins so that each comes after those providing the
services it injects; a plugin whose needs cannot be met is skipped, one whose
``apply`` raises is unwound and reported, and the rest still load.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import pkgutil
import sys
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dsh import DISTRIBUTION
from dsh.kernel.context import Context
from dsh.kernel.errors import DependencyCycleError, PluginDefinitionError
from dsh.kernel.plugin import Plugin

_log = logging.getLogger("dsh.kernel")

BUNDLED_GROUP = "dsh.bundled"
"""The entry point group, in dsh's own distribution only, that names the package of the
bundled plugins: the core finds them through its metadata, never by their name."""
ENTRY_POINT_GROUP = "dsh.plugins"


@dataclass(frozen=True)
class Candidate:
    """A plugin found by discovery, or the error that stopped it being found."""

    name: str
    origin: str
    plugin: Plugin | None = None
    error: str | None = None


class PluginStatus(enum.StrEnum):
    LOADED = "loaded"
    FAILED = "failed"
    SKIPPED = "skipped"
    DISABLED = "disabled"
    UNLOADED = "unloaded"


@dataclass
class PluginRecord:
    name: str
    origin: str
    status: PluginStatus
    plugin: Plugin | None = None
    error: str | None = None
    ctx: Context | None = field(default=None, repr=False)
    config: Any = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary for ``dsh plugins --json``."""
        return {
            "name": self.name,
            "origin": self.origin,
            "status": str(self.status),
            "provides": [key.name for key in self.plugin.provides] if self.plugin else [],
            "inject": [key.name for key in self.plugin.inject] if self.plugin else [],
            "error": self.error,
        }


# ---------------------------------------------------------------------- discovery


def _as_plugin(obj: object, where: str) -> Plugin:
    if isinstance(obj, Plugin):
        return obj
    inner = getattr(obj, "plugin", None)  # a module exposing `plugin`
    if isinstance(inner, Plugin):
        return inner
    raise PluginDefinitionError(f"{where} does not expose a dsh.kernel.Plugin named 'plugin'")


def _describe_error(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip()


def bundled_package() -> str | None:
    """The import name of the bundled plugins' package, as dsh's own distribution
    declares it; None when dsh runs without its metadata (not installed)."""
    try:
        entries = importlib.metadata.distribution(DISTRIBUTION).entry_points
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((entry.value for entry in entries if entry.group == BUNDLED_GROUP), None)


def discover_bundled(package: str | None = None) -> list[Candidate]:
    """Every module of the bundled plugin package (``package``, else the one dsh's
    distribution declares) that exposes ``plugin``."""
    package = package or bundled_package()
    if package is None:
        _log.warning("the bundled plugins are not found: %s is not installed", DISTRIBUTION)
        return []
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        return []
    found: list[Candidate] = []
    for info in sorted(pkgutil.iter_modules(spec.submodule_search_locations), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module_name = f"{package}.{info.name}"
        origin = f"bundled {module_name}"
        try:
            module = importlib.import_module(module_name)
            plugin = _as_plugin(module, module_name)
        except Exception as error:
            found.append(Candidate(info.name, origin, error=_describe_error(error)))
            continue
        found.append(Candidate(plugin.name, origin, plugin=plugin))
    return found


def discover_entry_points(group: str = ENTRY_POINT_GROUP) -> list[Candidate]:
    """Every plugin that an installed distribution names in the ``dsh.plugins`` group."""
    found: list[Candidate] = []
    for entry in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
        dist = getattr(entry, "dist", None)
        by = f" from {dist.name} {dist.version}" if dist is not None else ""
        origin = f"entry point {entry.name} = {entry.value}{by}"
        try:
            plugin = _as_plugin(entry.load(), entry.value)
        except Exception as error:
            found.append(Candidate(entry.name, origin, error=_describe_error(error)))
            continue
        found.append(Candidate(plugin.name, origin, plugin=plugin))
    return found


def discover_modules(names: Iterable[str]) -> list[Candidate]:
    """Plugins from modules named in settings (``[plugins] modules``): a local plugin
    needs no packaging, only to be importable."""
    found: list[Candidate] = []
    for module_name in names:
        origin = f"module {module_name} (settings)"
        try:
            plugin = _as_plugin(importlib.import_module(module_name), module_name)
        except Exception as error:
            found.append(Candidate(module_name, origin, error=_describe_error(error)))
            continue
        found.append(Candidate(plugin.name, origin, plugin=plugin))
    return found


_discovered: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Candidate]] = {}


def discover(modules: Iterable[str] = ()) -> list[Candidate]:
    """The bundled plugins, the installed ones and ``modules``: found once a process
    for the same ``modules`` and ``sys.path``. A start-up asks more than once (the
    setup's forms, then the runtime; ``dsh acp`` at every session) and each time read
    every installed distribution's metadata again, for the same answer."""
    key = (tuple(modules), tuple(sys.path))
    found = _discovered.get(key)
    if found is None:
        found = discover_bundled() + discover_entry_points() + discover_modules(key[0])
        _discovered[key] = found
    return list(found)


# ---------------------------------------------------------------------- ordering


def order_plugins(plugins: list[Plugin]) -> list[Plugin]:
    """Sort so that providers come before the plugins injecting their services.

    Each plugin's providers are pulled ahead of it in the order it names the services;
    otherwise the given order is kept. Raises :class:`DependencyCycleError` for a cycle.
    """
    providers: dict[str, list[str]] = {}
    for plugin in plugins:
        for service in plugin.provides:
            providers.setdefault(service.name, []).append(plugin.name)
    by_name = {plugin.name: plugin for plugin in plugins}
    deps: dict[str, list[str]] = {}
    for plugin in plugins:
        wanted = [*plugin.inject, *plugin.optional]
        deps[plugin.name] = [
            provider
            for service in wanted
            for provider in providers.get(service.name, ())
            if provider != plugin.name
        ]

    ordered: list[Plugin] = []
    state: dict[str, str] = {}  # "visiting" | "done"

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise DependencyCycleError([*path[path.index(name) :], name])
        state[name] = "visiting"
        for dep in deps[name]:
            visit(dep, [*path, name])
        state[name] = "done"
        ordered.append(by_name[name])

    for plugin in plugins:
        visit(plugin.name, [])
    return ordered


# ---------------------------------------------------------------------- vocabulary


async def load_vocabularies(root: Context, candidates: Iterable[Candidate]) -> list[str]:
    """Register the vocabulary of every plugin found, applying none of them: what a
    process that only reads sessions needs to read them as a running dsh does. Each
    plugin's registrations are owned by a child of ``root`` (disposing it undoes
    them); one that fails is undone, logged and left out. Returns the names loaded."""
    loaded: list[str] = []
    for candidate in candidates:
        plugin = candidate.plugin
        if plugin is None or plugin.vocabulary is None:
            continue
        ctx = root.child(scope=None, name=plugin.name)
        try:
            plugin.vocabulary(ctx)
        except Exception as error:
            await ctx.dispose()
            _log.warning("plugin %s: its vocabulary failed: %s", plugin.name, error)
            continue
        loaded.append(plugin.name)
    return loaded


# ---------------------------------------------------------------------- loading


class PluginHost:
    """Loads plugins onto a root context and keeps the report of what happened."""

    def __init__(self, root: Context) -> None:
        self.root = root
        self.records: list[PluginRecord] = []

    def record(self, name: str) -> PluginRecord | None:
        return next((r for r in self.records if r.name == name), None)

    @property
    def loaded(self) -> list[PluginRecord]:
        return [r for r in self.records if r.status is PluginStatus.LOADED]

    async def load(
        self,
        candidates: Iterable[Candidate],
        configs: Mapping[str, Mapping[str, Any]] | None = None,
        disabled: Iterable[str] = (),
        config_origins: Mapping[str, str] | None = None,
    ) -> list[PluginRecord]:
        """Load every usable candidate; returns the records of this call, in load order.

        ``config_origins`` says where each plugin's config came from (a settings file),
        so that an invalid config is reported with its file.
        """
        configs = configs or {}
        origins_of_config = config_origins or {}
        disabled_names = set(disabled)
        records: list[PluginRecord] = []
        usable: list[Plugin] = []
        origins: dict[str, str] = {}
        taken = {r.name: r.origin for r in self.records}

        for candidate in candidates:
            if candidate.plugin is None:
                records.append(
                    PluginRecord(
                        candidate.name, candidate.origin, PluginStatus.FAILED, error=candidate.error
                    )
                )
                continue
            name = candidate.plugin.name
            if name in taken or name in origins:
                first = taken.get(name) or origins[name]
                records.append(
                    PluginRecord(
                        name,
                        candidate.origin,
                        PluginStatus.FAILED,
                        candidate.plugin,
                        error=f"duplicate plugin name; already found at {first}",
                    )
                )
                continue
            if name in disabled_names:
                records.append(
                    PluginRecord(
                        name,
                        candidate.origin,
                        PluginStatus.DISABLED,
                        candidate.plugin,
                        error="disabled by settings",
                    )
                )
                continue
            origins[name] = candidate.origin
            usable.append(candidate.plugin)

        try:
            ordered = order_plugins(usable)
        except DependencyCycleError as cycle:
            in_cycle = set(cycle.cycle)
            for plugin in usable:
                if plugin.name in in_cycle:
                    records.append(
                        PluginRecord(
                            plugin.name,
                            origins[plugin.name],
                            PluginStatus.FAILED,
                            plugin,
                            error=str(cycle),
                        )
                    )
            rest = [plugin for plugin in usable if plugin.name not in in_cycle]
            ordered = order_plugins(rest)

        why_missing: dict[str, str] = {}  # service name -> why its provider is unavailable
        for record in records:
            if record.plugin is not None:
                for service in record.plugin.provides:
                    why_missing.setdefault(
                        service.name, f"plugin {record.name!r} that provides it {record.status}"
                    )

        for plugin in ordered:
            record = await self._load_one(
                plugin,
                origins[plugin.name],
                configs.get(plugin.name, {}),
                why_missing,
                origins_of_config.get(plugin.name),
            )
            records.append(record)
            if record.status is not PluginStatus.LOADED:
                for service in plugin.provides:
                    why_missing.setdefault(
                        service.name, f"plugin {plugin.name!r} that provides it {record.status}"
                    )

        self.records.extend(records)
        for record in records:
            if record.status is PluginStatus.FAILED:
                _log.warning("plugin %s (%s) failed: %s", record.name, record.origin, record.error)
        return records

    async def _load_one(
        self,
        plugin: Plugin,
        origin: str,
        raw_config: Mapping[str, Any],
        why_missing: dict[str, str],
        config_origin: str | None,
    ) -> PluginRecord:
        for service in plugin.inject:
            if not self.root.has(service):
                reason = why_missing.get(service.name, "nothing provides it")
                return PluginRecord(
                    plugin.name,
                    origin,
                    PluginStatus.SKIPPED,
                    plugin,
                    error=f"needs service {service.name!r}: {reason}",
                )
        try:
            config = plugin.config.model_validate(dict(raw_config))
        except ValidationError as error:
            where = f" in {config_origin}" if config_origin else ""
            return PluginRecord(
                plugin.name,
                origin,
                PluginStatus.FAILED,
                plugin,
                error=f"invalid config{where} [plugins.{plugin.name}]: {error}",
            )

        ctx = self.root.child(scope=None, name=plugin.name)
        try:
            if plugin.vocabulary is not None:
                plugin.vocabulary(ctx)
            result = plugin.apply(ctx, config)
            if inspect.isawaitable(result):
                await result
            for service in plugin.provides:
                if not ctx.has(service):
                    raise PluginDefinitionError(
                        f"declares that it provides {service.name!r} but did not provide it"
                    )
        except Exception as error:
            await ctx.dispose()
            return PluginRecord(
                plugin.name, origin, PluginStatus.FAILED, plugin, error=_describe_error(error)
            )
        return PluginRecord(
            plugin.name, origin, PluginStatus.LOADED, plugin, ctx=ctx, config=config
        )

    async def unload(self, name: str) -> list[str]:
        """Unload ``name`` and, first, every loaded plugin that injects what it provides.
        Returns the names unloaded, in the order they went."""
        target = self.record(name)
        if target is None or target.status is not PluginStatus.LOADED or target.plugin is None:
            return []
        gone: list[str] = []
        for record in reversed(self.loaded):
            if record is target or record.plugin is None:
                continue
            if set(record.plugin.inject) & set(target.plugin.provides):
                gone.extend(await self.unload(record.name))
        assert target.ctx is not None
        await target.ctx.dispose()
        target.status = PluginStatus.UNLOADED
        target.ctx = None
        gone.append(name)
        return gone

    async def unload_all(self) -> None:
        """Unload every plugin, the last loaded first."""
        for record in reversed(self.loaded):
            await self.unload(record.name)
