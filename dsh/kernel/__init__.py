"""The plugin kernel: contexts, services, hooks, scoped disposal and plugin loading.

This module is public API: plugins import from ``dsh.kernel`` and nothing below it.
"""

from __future__ import annotations

from dsh.kernel.context import (
    KERNEL_ERROR,
    Context,
    ContextBound,
    Disposer,
    ReportedError,
    ServiceKey,
)
from dsh.kernel.errors import (
    ContextDisposedError,
    DependencyCycleError,
    HookDeclarationError,
    KernelError,
    PluginDefinitionError,
    RegistrationConflictError,
    ServiceConflictError,
    ServiceNotFoundError,
)
from dsh.kernel.hooks import Chain, First, Gather, Hook, Next, Notify
from dsh.kernel.loader import (
    ENTRY_POINT_GROUP,
    Candidate,
    PluginHost,
    PluginRecord,
    PluginStatus,
    bundled_package,
    discover,
    discover_bundled,
    discover_entry_points,
    discover_modules,
    load_vocabularies,
    order_plugins,
)
from dsh.kernel.plugin import CliCommand, CliHost, NoConfig, Plugin
from dsh.kernel.registry import RegistryView, ScopedRegistry

__all__ = [
    "ENTRY_POINT_GROUP",
    "KERNEL_ERROR",
    "Candidate",
    "Chain",
    "CliCommand",
    "CliHost",
    "Context",
    "ContextBound",
    "ContextDisposedError",
    "DependencyCycleError",
    "Disposer",
    "First",
    "Gather",
    "Hook",
    "HookDeclarationError",
    "KernelError",
    "Next",
    "NoConfig",
    "Notify",
    "Plugin",
    "PluginDefinitionError",
    "PluginHost",
    "PluginRecord",
    "PluginStatus",
    "RegistrationConflictError",
    "RegistryView",
    "ReportedError",
    "ScopedRegistry",
    "ServiceConflictError",
    "ServiceKey",
    "ServiceNotFoundError",
    "bundled_package",
    "discover",
    "discover_bundled",
    "discover_entry_points",
    "discover_modules",
    "load_vocabularies",
    "order_plugins",
]
