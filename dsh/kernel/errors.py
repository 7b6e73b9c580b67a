"""Errors raised by the plugin kernel."""

from __future__ import annotations


class KernelError(Exception):
    """Base class for every error the kernel raises."""


class ContextDisposedError(KernelError):
    """A registration was attempted on a context that has already been disposed."""


class ServiceNotFoundError(KernelError, LookupError):
    """No service is provided under the requested key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no service named {key!r} is provided")
        self.key = key


class ServiceConflictError(KernelError):
    """A service name is already provided in the same scope."""

    def __init__(self, key: str) -> None:
        super().__init__(f"a service named {key!r} is already provided in this scope")
        self.key = key


class RegistrationConflictError(KernelError):
    """A scoped registry already holds an item under that name in that scope."""

    def __init__(self, registry: str, name: str) -> None:
        super().__init__(f"{registry} {name!r} is already registered in this scope")
        self.registry = registry
        self.name = name


class HookDeclarationError(KernelError):
    """A hook spec with a malformed name, or a name another spec already declared."""


class PluginDefinitionError(KernelError):
    """A module or entry point does not expose a usable plugin."""


class DependencyCycleError(KernelError):
    """Plugins depend on each other in a cycle; ``cycle`` names it, first name repeated last."""

    def __init__(self, cycle: list[str]) -> None:
        super().__init__("plugin dependency cycle: " + " -> ".join(cycle))
        self.cycle = cycle
