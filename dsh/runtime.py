"""The running process: a root context with the core services, and the loaded plugins."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh.kernel import Candidate, Context, PluginHost, discover


@dataclass
class Runtime:
    root: Context
    plugins: PluginHost

    async def aclose(self) -> None:
        """Unload plugins (last loaded first), then dispose the core."""
        await self.plugins.unload_all()
        await self.root.dispose()


async def start_runtime(
    *,
    candidates: Iterable[Candidate] | None = None,
    plugin_configs: Mapping[str, Mapping[str, Any]] | None = None,
    disabled_plugins: Iterable[str] = (),
) -> Runtime:
    """Build the root context and load plugins (discovered unless ``candidates`` is given)."""
    root = Context(name="core")
    host = PluginHost(root)
    await host.load(
        discover() if candidates is None else candidates,
        configs=plugin_configs,
        disabled=disabled_plugins,
    )
    return Runtime(root, host)
