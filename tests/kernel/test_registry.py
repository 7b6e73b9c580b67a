from __future__ import annotations

import pytest

from dsh.kernel import Context, RegistrationConflictError, RegistryView, ScopedRegistry, ServiceKey

COMMANDS: ServiceKey[RegistryView[str]] = ServiceKey("commands")
TOOLS: ServiceKey[RegistryView[str]] = ServiceKey("tools")


async def test_registration_belongs_to_the_registering_context() -> None:
    root = Context()
    root.provide(COMMANDS, ScopedRegistry[str]("command"))
    plugin = root.child(name="p")
    plugin.get(COMMANDS).register("compact", "compact handler")
    assert root.get(COMMANDS).visible() == {"compact": "compact handler"}
    assert root.get(COMMANDS)._registry.owner("compact") == "p"
    await plugin.dispose()
    assert root.get(COMMANDS).visible() == {}


async def test_agent_items_shadow_globals_for_that_agent_only() -> None:
    root = Context()
    registry = ScopedRegistry[str]("tool")
    root.provide(TOOLS, registry)
    root.get(TOOLS).register("read", "global read")
    root.get(TOOLS).register("bash", "global bash")
    agent = object()
    agent_ctx = root.child(agent)
    agent_ctx.get(TOOLS).register("read", "sandboxed read")
    agent_ctx.get(TOOLS).register("task", "subagent tool")

    assert agent_ctx.get(TOOLS).visible() == {
        "read": "sandboxed read",
        "bash": "global bash",
        "task": "subagent tool",
    }
    assert root.get(TOOLS).visible() == {"read": "global read", "bash": "global bash"}
    assert "task" in agent_ctx.get(TOOLS)
    assert "task" not in root.get(TOOLS)
    version = registry.version
    await agent_ctx.dispose()
    assert registry.version > version
    assert agent_ctx.get(TOOLS).get("read") == "global read"


async def test_duplicate_name_in_one_scope_is_refused() -> None:
    root = Context()
    root.provide(TOOLS, ScopedRegistry[str]("tool"))
    root.get(TOOLS).register("read", "a")
    with pytest.raises(RegistrationConflictError, match="tool 'read'"):
        root.child().get(TOOLS).register("read", "b")
