from __future__ import annotations

import pytest

from dsh.kernel import Context, RegistrationConflictError, ScopedRegistry


async def test_registration_belongs_to_the_registering_context() -> None:
    root = Context()
    root.provide("commands", ScopedRegistry[str]("command"))
    plugin = root.child(name="p")
    plugin.commands.register("compact", "compact handler")
    assert root.commands.visible() == {"compact": "compact handler"}
    assert root.get("commands")._registry.owner("compact") == "p"
    await plugin.dispose()
    assert root.commands.visible() == {}


async def test_agent_items_shadow_globals_for_that_agent_only() -> None:
    root = Context()
    registry = ScopedRegistry[str]("tool")
    root.provide("tools", registry)
    root.tools.register("read", "global read")
    root.tools.register("bash", "global bash")
    agent = object()
    agent_ctx = root.child(agent)
    agent_ctx.tools.register("read", "sandboxed read")
    agent_ctx.tools.register("task", "subagent tool")

    assert agent_ctx.tools.visible() == {
        "read": "sandboxed read",
        "bash": "global bash",
        "task": "subagent tool",
    }
    assert root.tools.visible() == {"read": "global read", "bash": "global bash"}
    assert "task" in agent_ctx.tools
    assert "task" not in root.tools
    version = registry.version
    await agent_ctx.dispose()
    assert registry.version > version
    assert agent_ctx.tools.get("read") == "global read"


async def test_duplicate_name_in_one_scope_is_refused() -> None:
    root = Context()
    root.provide("tools", ScopedRegistry[str]("tool"))
    root.tools.register("read", "a")
    with pytest.raises(RegistrationConflictError, match="tool 'read'"):
        root.child().tools.register("read", "b")
