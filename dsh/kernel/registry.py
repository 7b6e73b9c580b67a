"""A named, scope-aware registry: the shape shared by tools, commands and prompt sections.

Provide a ``ScopedRegistry`` as a service; each context that reaches it through
``ctx.get(...)`` gets a :class:`RegistryView` bound to itself, so what it registers is
undone when that context (a plugin, an agent) is disposed. Items registered from an
agent scope are visible only to that agent and shadow global items of the same name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from dsh.kernel.errors import RegistrationConflictError

if TYPE_CHECKING:
    from dsh.kernel.context import Context, Disposer

T = TypeVar("T")


@dataclass(eq=False)
class _Entry(Generic[T]):
    item: T
    scope: object | None
    owner: str
    order: int


class ScopedRegistry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, list[_Entry[T]]] = {}
        self._order = 0
        self.version = 0
        """Bumped on every change, so readers can cache what they derive from the items."""

    def bind_context(self, ctx: Context) -> RegistryView[T]:
        return RegistryView(self, ctx)

    def add(self, ctx: Context, name: str, item: T) -> Disposer:
        """Register ``item`` as ``name`` for ``ctx``'s scope, owned by ``ctx``."""
        entries = self._entries.setdefault(name, [])
        if any(entry.scope is ctx.scope for entry in entries):
            raise RegistrationConflictError(self.kind, name)
        self._order += 1
        entry = _Entry(item, ctx.scope, ctx.name, self._order)

        def setup() -> Disposer:
            entries.append(entry)
            self.version += 1

            def remove() -> None:
                if entry in entries:
                    entries.remove(entry)
                    self.version += 1

            return remove

        return ctx.effect(setup)

    def get(self, name: str, scope: object | None = None) -> T | None:
        """The item visible to ``scope`` under ``name``: its own, else the global one."""
        fallback: T | None = None
        for entry in self._entries.get(name, ()):
            if scope is not None and entry.scope is scope:
                return entry.item
            if entry.scope is None:
                fallback = entry.item
        return fallback

    def visible(self, scope: object | None = None) -> dict[str, T]:
        """Every name visible to ``scope``, in registration order."""
        chosen: list[tuple[int, str, T]] = []
        for name, entries in self._entries.items():
            pick: _Entry[T] | None = None
            for entry in entries:
                if scope is not None and entry.scope is scope:
                    pick = entry
                    break
                if entry.scope is None:
                    pick = entry
            if pick is not None:
                chosen.append((pick.order, name, pick.item))
        chosen.sort(key=lambda row: row[0])
        return {name: item for _, name, item in chosen}

    def owner(self, name: str, scope: object | None = None) -> str | None:
        """The name of the context that registered what ``scope`` sees under ``name``."""
        fallback: str | None = None
        for entry in self._entries.get(name, ()):
            if scope is not None and entry.scope is scope:
                return entry.owner
            if entry.scope is None:
                fallback = entry.owner
        return fallback


class RegistryView(Generic[T]):
    """A registry as one context sees it and registers into it."""

    __slots__ = ("_ctx", "_registry")

    def __init__(self, registry: ScopedRegistry[T], ctx: Context) -> None:
        self._registry = registry
        self._ctx = ctx

    def register(self, name: str, item: T) -> Disposer:
        return self._registry.add(self._ctx, name, item)

    def get(self, name: str) -> T | None:
        return self._registry.get(name, self._ctx.scope)

    def visible(self) -> dict[str, T]:
        return self._registry.visible(self._ctx.scope)

    def __iter__(self) -> Iterator[str]:
        return iter(self.visible())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None
