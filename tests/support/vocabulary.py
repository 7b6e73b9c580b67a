"""Bundled plugins' vocabulary (event types, fold steps) for tests that read or write
their events without a runtime: registered as the plugin host registers it, on a
context of the plugin's own, and given up when the test is done."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib import import_module

from dsh.kernel import Context, Plugin, discover_bundled


def with_vocabulary() -> tuple[str, ...]:
    """The modules of the bundled plugins that have a vocabulary."""
    return tuple(
        c.origin.rpartition(".")[2]
        for c in discover_bundled()
        if c.plugin is not None and c.plugin.vocabulary is not None
    )


def bundled(name: str) -> Plugin:
    plugin = import_module(f"dsh_plugins.{name}").plugin
    assert isinstance(plugin, Plugin)
    return plugin


def _registered(names: tuple[str, ...]) -> Context:
    root = Context(name="test-vocabulary")
    for name in names or with_vocabulary():
        plugin = bundled(name)
        assert plugin.vocabulary is not None, f"plugin {name} has no vocabulary"
        plugin.vocabulary(root.child(scope=None, name=name))
    return root


@contextmanager
def plugin_vocabulary(*names: str) -> Iterator[None]:
    """The vocabulary of the bundled plugins ``names`` (modules of ``plugins``; all of
    them when none is named) while the block runs (a test without an event loop)."""
    root = _registered(names)
    try:
        yield
    finally:
        asyncio.run(root.dispose())


@asynccontextmanager
async def async_plugin_vocabulary(*names: str) -> AsyncIterator[None]:
    """:func:`plugin_vocabulary`, for an async test."""
    root = _registered(names)
    try:
        yield
    finally:
        await root.dispose()
