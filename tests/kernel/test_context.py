from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh.kernel import (
    ERROR_EVENT,
    Context,
    ContextDisposedError,
    ReportedError,
    ServiceConflictError,
    ServiceKey,
    ServiceNotFoundError,
)


def errors_of(ctx: Context) -> list[ReportedError]:
    seen: list[ReportedError] = []
    ctx.on(ERROR_EVENT, seen.append)
    return seen


# ---------------------------------------------------------------------- services


async def test_provide_and_get_by_name_attribute_and_key() -> None:
    root = Context()
    key: ServiceKey[list[int]] = ServiceKey("numbers")
    root.provide(key, [1, 2])
    assert root.get("numbers") == [1, 2]
    assert root.numbers == [1, 2]
    assert root.get(key) == [1, 2]
    assert root.has("numbers")
    assert not root.has("absent")
    assert root.get("absent", "fallback") == "fallback"


async def test_missing_service_is_a_clear_attribute_error() -> None:
    root = Context()
    with pytest.raises(ServiceNotFoundError, match="'llm'"):
        _ = root.llm
    assert getattr(root, "llm", None) is None


async def test_same_service_twice_in_one_scope_conflicts() -> None:
    root = Context()
    root.provide("x", 1)
    with pytest.raises(ServiceConflictError):
        root.child().provide("x", 2)


async def test_disposing_the_provider_withdraws_the_service() -> None:
    root = Context()
    plugin = root.child(name="p")
    plugin.provide("x", 1)
    assert root.x == 1
    await plugin.dispose()
    assert not root.has("x")


async def test_agent_scoped_service_shadows_global_only_for_that_agent() -> None:
    root = Context()
    root.provide("persona", "global")
    agent_a, agent_b = object(), object()
    ctx_a = root.child(agent_a)
    ctx_b = root.child(agent_b)
    ctx_a.provide("persona", "scoped")
    assert ctx_a.persona == "scoped"
    assert ctx_b.persona == "global"
    assert root.persona == "global"
    await ctx_a.dispose()
    assert root.child(agent_a).persona == "global"


async def test_services_bind_to_their_caller() -> None:
    class Registrar:
        def __init__(self) -> None:
            self.names: list[str] = []

        def bind_context(self, ctx: Context) -> Any:
            registrar = self

            class View:
                def add(self, name: str) -> None:
                    registrar.names.append(name)
                    ctx.effect(lambda: lambda: registrar.names.remove(name))

            return View()

    root = Context()
    service = Registrar()
    root.provide("things", service)
    plugin = root.child(name="p")
    plugin.things.add("a")
    root.things.add("b")
    assert service.names == ["a", "b"]
    await plugin.dispose()
    assert service.names == ["b"]


# ---------------------------------------------------------------------- emit


async def test_emit_calls_listeners_in_order_with_prepend_first() -> None:
    root = Context()
    calls: list[str] = []
    root.on("e", lambda v: calls.append(f"a{v}"))
    root.on("e", lambda v: calls.append(f"b{v}"))
    root.on("e", lambda v: calls.append(f"first{v}"), prepend=True)
    root.emit("e", 1)
    assert calls == ["first1", "a1", "b1"]


async def test_emit_isolates_and_reports_a_failing_listener() -> None:
    root = Context()
    reported = errors_of(root)
    calls: list[str] = []

    def broken(_: object) -> None:
        raise RuntimeError("boom")

    root.child(name="bad").on("e", broken)
    root.on("e", lambda v: calls.append(v))
    root.emit("e", "ok")  # must not raise
    assert calls == ["ok"]
    assert len(reported) == 1
    assert reported[0].origin == "listener"
    assert reported[0].event == "e"
    assert reported[0].owner == "bad"
    assert isinstance(reported[0].error, RuntimeError)


async def test_emit_runs_async_listeners_as_owned_tasks_and_reports_their_failure() -> None:
    root = Context()
    reported = errors_of(root)
    done = asyncio.Event()

    async def ok(_: object) -> None:
        done.set()

    async def failing(_: object) -> None:
        raise ValueError("later")

    root.on("e", ok)
    root.on("e", failing)
    root.emit("e", None)
    await asyncio.wait_for(done.wait(), 1)
    for _ in range(5):
        await asyncio.sleep(0)
    assert [r.event for r in reported] == ["e"]
    assert isinstance(reported[0].error, ValueError)


async def test_failing_error_listener_does_not_recurse() -> None:
    root = Context()
    root.on(ERROR_EVENT, lambda _: 1 / 0)
    root.on("e", lambda: 1 / 0)
    root.emit("e")  # one report, whose listener fails; that is only logged


async def test_listeners_are_snapshotted_per_dispatch() -> None:
    root = Context()
    calls: list[str] = []

    def adds_another() -> None:
        calls.append("first")
        root.on("e", lambda: calls.append("late"))

    root.on("e", adds_another)
    root.emit("e")
    assert calls == ["first"]


async def test_removing_a_listener_with_its_disposer() -> None:
    root = Context()
    calls: list[int] = []
    off = root.on("e", calls.append)
    root.emit("e", 1)
    off()
    off()  # twice is harmless
    root.emit("e", 2)
    assert calls == [1]


async def test_scoped_listeners_run_only_for_their_subject() -> None:
    root = Context()
    agent, other = object(), object()
    calls: list[str] = []
    root.on("e", lambda: calls.append("global"))
    root.child(agent).on("e", lambda: calls.append("agent"))
    root.emit("e", subject=agent)
    root.emit("e", subject=other)
    root.emit("e")
    assert calls == ["global", "agent", "global", "global"]


# ---------------------------------------------------------------------- serial, parallel


async def test_serial_awaits_in_order_and_the_first_real_result_stops_the_chain() -> None:
    root = Context()
    calls: list[str] = []

    async def nothing() -> None:
        calls.append("none")

    async def false() -> bool:
        calls.append("false")
        return False

    async def answer() -> str:
        calls.append("answer")
        return "stop here"

    root.on("e", nothing)
    root.on("e", false)
    root.on("e", answer)
    root.on("e", lambda: calls.append("never"))
    assert await root.serial("e") == "stop here"
    assert calls == ["none", "false", "answer"]


async def test_serial_with_no_result_returns_none_and_propagates_errors() -> None:
    root = Context()
    root.on("e", lambda: None)
    assert await root.serial("e") is None
    root.on("e", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        await root.serial("e")


async def test_parallel_runs_concurrently_then_raises_the_first_error() -> None:
    root = Context()
    started: list[str] = []
    gate = asyncio.Event()

    async def slow(name: str) -> None:
        started.append(name)
        await gate.wait()

    async def opener() -> None:
        started.append("opener")
        gate.set()

    root.on("e", lambda: slow("a"))
    root.on("e", lambda: slow("b"))
    root.on("e", opener)
    await asyncio.wait_for(root.parallel("e"), 1)
    assert sorted(started) == ["a", "b", "opener"]

    async def fail(message: str) -> None:
        raise RuntimeError(message)

    root.on("f", lambda: fail("first"))
    root.on("f", lambda: fail("second"))
    with pytest.raises(RuntimeError, match="first"):
        await root.parallel("f")


# ---------------------------------------------------------------------- waterfall


async def test_waterfall_nests_listeners_around_the_default() -> None:
    root = Context()
    trace: list[str] = []

    async def outer(value: int, next: Any) -> int:
        trace.append("outer in")
        result = await next()
        trace.append("outer out")
        return result * 10

    async def inner(value: int, next: Any) -> int:
        trace.append("inner in")
        return await next(value + 1)  # transforms the value for the rest of the chain

    async def default(value: int) -> int:
        trace.append(f"default {value}")
        return value

    root.on("w", outer)
    root.on("w", inner)
    assert await root.waterfall("w", 1, default=default) == 20
    assert trace == ["outer in", "inner in", "default 2", "outer out"]


async def test_waterfall_short_circuits_when_next_is_not_called() -> None:
    root = Context()
    called: list[str] = []

    async def blocker(prompt: str, next: Any) -> str:
        return "blocked"

    async def later(prompt: str, next: Any) -> str:
        called.append("later")
        return await next()

    root.on("w", blocker)
    root.on("w", later)

    async def default(prompt: str) -> str:
        called.append("default")
        return prompt

    assert await root.waterfall("w", "hi", default=default) == "blocked"
    assert called == []


async def test_waterfall_without_listeners_is_the_default() -> None:
    root = Context()
    assert await root.waterfall("w", 3, default=lambda v: v * 2) == 6


# ---------------------------------------------------------------------- disposal


async def test_dispose_runs_effects_once_newest_first_across_nested_children() -> None:
    root = Context()
    order: list[str] = []
    root.effect(lambda: lambda: order.append("root-1"))
    child = root.child(name="child")
    child.effect(lambda: lambda: order.append("child-1"))
    grandchild = child.child(name="grandchild")
    grandchild.effect(lambda: lambda: order.append("grandchild-1"))
    child.effect(lambda: lambda: order.append("child-2"))
    root.effect(lambda: lambda: order.append("root-2"))

    async def async_undo() -> None:
        order.append("root-3-async")

    root.effect(lambda: async_undo)
    await root.dispose()
    await root.dispose()  # once only
    assert order == [
        "root-3-async",
        "root-2",
        "child-2",
        "grandchild-1",
        "child-1",
        "root-1",
    ]


async def test_disposing_a_child_early_detaches_it_from_its_parent() -> None:
    root = Context()
    order: list[str] = []
    child = root.child()
    child.effect(lambda: lambda: order.append("child"))
    await child.dispose()
    await root.dispose()
    assert order == ["child"]


async def test_a_failing_disposer_is_reported_and_the_rest_still_run() -> None:
    root = Context()
    reported = errors_of(root)
    order: list[str] = []
    plugin = root.child(name="p")
    plugin.effect(lambda: lambda: order.append("first"))

    def broken() -> None:
        raise RuntimeError("cannot undo")

    plugin.effect(lambda: broken)
    plugin.effect(lambda: lambda: order.append("last"))
    await plugin.dispose()
    assert order == ["last", "first"]
    assert [(r.origin, r.owner) for r in reported] == [("dispose", "p")]


async def test_registering_on_a_disposed_context_raises() -> None:
    root = Context()
    child = root.child()
    await child.dispose()
    with pytest.raises(ContextDisposedError):
        child.on("e", print)
    with pytest.raises(ContextDisposedError):
        child.provide("x", 1)
    with pytest.raises(ContextDisposedError):
        child.child()


async def test_agent_scope_unwinds_everything_it_registered() -> None:
    root = Context()
    agent = object()
    agent_ctx = root.child(agent, name="agent")
    calls: list[str] = []
    agent_ctx.on("e", lambda: calls.append("agent listener"))
    agent_ctx.provide("workspace", "/tmp/x")
    tool_ctx = agent_ctx.child(name="agent tool")
    tool_ctx.effect(lambda: lambda: calls.append("tool undone"))
    assert tool_ctx.scope is agent

    root.emit("e", subject=agent)
    await agent_ctx.dispose()
    root.emit("e", subject=agent)
    assert calls == ["agent listener", "tool undone"]
    assert not agent_ctx.has("workspace")
    assert root.listener_count("e") == 0


async def test_spawned_tasks_are_cancelled_on_dispose_and_failures_reported() -> None:
    root = Context()
    reported = errors_of(root)
    owner = root.child(name="owner")
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cancelled.set()

    async def crash() -> None:
        raise KeyError("k")

    owner.spawn(forever())
    failing = owner.spawn(crash())
    await asyncio.gather(failing, return_exceptions=True)
    await asyncio.sleep(0)
    await owner.dispose()
    assert cancelled.is_set()
    assert [(r.origin, r.owner) for r in reported] == [("task", "owner")]
