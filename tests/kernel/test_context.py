from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh.kernel import (
    KERNEL_ERROR,
    Chain,
    Context,
    ContextDisposedError,
    First,
    Gather,
    HookDeclarationError,
    Next,
    Notify,
    ReportedError,
    ServiceConflictError,
    ServiceKey,
    ServiceNotFoundError,
)

# Hooks of these tests: each name is declared once per process.
E: Notify[[Any]] = Notify("kernel-test/e")
BARE: Notify[[]] = Notify("kernel-test/bare")
OF_AGENT: Notify[[object]] = Notify("kernel-test/of-agent", subject=lambda agent: agent)
ASK: First[[], Any] = First("kernel-test/ask")
GATHER: Gather[[], Any] = Gather("kernel-test/gather")
FAILING: Gather[[], None] = Gather("kernel-test/failing")
W: Chain[Any, Any] = Chain("kernel-test/w")

NUMBERS: ServiceKey[list[int]] = ServiceKey("numbers")
X: ServiceKey[int] = ServiceKey("x")
PERSONA: ServiceKey[str] = ServiceKey("persona")
THINGS: ServiceKey[Any] = ServiceKey("things")
WORKSPACE: ServiceKey[str] = ServiceKey("workspace")


def errors_of(ctx: Context) -> list[ReportedError]:
    seen: list[ReportedError] = []
    ctx.on(KERNEL_ERROR, seen.append)
    return seen


# ---------------------------------------------------------------------- services


async def test_provide_and_get_by_key() -> None:
    root = Context()
    root.provide(NUMBERS, [1, 2])
    assert root.get(NUMBERS) == [1, 2]
    assert root.get(ServiceKey[list[int]]("numbers")) == [1, 2]  # a key is its name
    assert root.has(NUMBERS)
    absent: ServiceKey[str] = ServiceKey("absent")
    assert not root.has(absent)
    assert root.get(absent, "fallback") == "fallback"


async def test_a_missing_service_is_a_clear_error() -> None:
    root = Context()
    with pytest.raises(ServiceNotFoundError, match="'llm'"):
        root.get(ServiceKey("llm"))


async def test_services_are_reached_only_by_key() -> None:
    root = Context()
    root.provide(X, 1)
    with pytest.raises(
        TypeError, match=r"ServiceKey, not 'x' \(the core's keys are in dsh.services"
    ):
        root.get("x")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="ServiceKey"):
        root.provide("y", 2)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        _ = root.x  # type: ignore[attr-defined]


async def test_same_service_twice_in_one_scope_conflicts() -> None:
    root = Context()
    root.provide(X, 1)
    with pytest.raises(ServiceConflictError):
        root.child().provide(X, 2)


async def test_disposing_the_provider_withdraws_the_service() -> None:
    root = Context()
    plugin = root.child(name="p")
    plugin.provide(X, 1)
    assert root.get(X) == 1
    await plugin.dispose()
    assert not root.has(X)


async def test_agent_scoped_service_shadows_global_only_for_that_agent() -> None:
    root = Context()
    root.provide(PERSONA, "global")
    agent_a, agent_b = object(), object()
    ctx_a = root.child(agent_a)
    ctx_b = root.child(agent_b)
    ctx_a.provide(PERSONA, "scoped")
    assert ctx_a.get(PERSONA) == "scoped"
    assert ctx_b.get(PERSONA) == "global"
    assert root.get(PERSONA) == "global"
    await ctx_a.dispose()
    assert root.child(agent_a).get(PERSONA) == "global"


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
    root.provide(THINGS, service)
    plugin = root.child(name="p")
    plugin.get(THINGS).add("a")
    root.get(THINGS).add("b")
    assert service.names == ["a", "b"]
    await plugin.dispose()
    assert service.names == ["b"]


# ---------------------------------------------------------------------- emit


async def test_emit_calls_listeners_in_order_with_prepend_first() -> None:
    root = Context()
    calls: list[str] = []
    root.on(E, lambda v: calls.append(f"a{v}"))
    root.on(E, lambda v: calls.append(f"b{v}"))
    root.on(E, lambda v: calls.append(f"first{v}"), prepend=True)
    root.emit(E, 1)
    assert calls == ["first1", "a1", "b1"]


async def test_emit_isolates_and_reports_a_failing_listener() -> None:
    root = Context()
    reported = errors_of(root)
    calls: list[str] = []

    def broken(_: object) -> None:
        raise RuntimeError("boom")

    root.child(name="bad").on(E, broken)
    root.on(E, lambda v: calls.append(v))
    root.emit(E, "ok")  # must not raise
    assert calls == ["ok"]
    assert len(reported) == 1
    assert reported[0].origin == "listener"
    assert reported[0].event == "kernel-test/e"
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

    root.on(E, ok)
    root.on(E, failing)
    root.emit(E, None)
    await asyncio.wait_for(done.wait(), 1)
    for _ in range(5):
        await asyncio.sleep(0)
    assert [r.event for r in reported] == ["kernel-test/e"]
    assert isinstance(reported[0].error, ValueError)


async def test_failing_error_listener_does_not_recurse() -> None:
    root = Context()
    root.on(KERNEL_ERROR, lambda _: 1 / 0)
    root.on(BARE, lambda: 1 / 0)
    root.emit(BARE)  # one report, whose listener fails; that is only logged


async def test_listeners_are_snapshotted_per_dispatch() -> None:
    root = Context()
    calls: list[str] = []

    def adds_another() -> None:
        calls.append("first")
        root.on(BARE, lambda: calls.append("late"))

    root.on(BARE, adds_another)
    root.emit(BARE)
    assert calls == ["first"]


async def test_removing_a_listener_with_its_disposer() -> None:
    root = Context()
    calls: list[int] = []
    off = root.on(E, calls.append)
    root.emit(E, 1)
    off()
    off()  # twice is harmless
    root.emit(E, 2)
    assert calls == [1]


async def test_scoped_listeners_hear_only_the_subject_the_spec_names() -> None:
    root = Context()
    agent, other = object(), object()
    calls: list[str] = []
    root.on(OF_AGENT, lambda a: calls.append("global"))
    root.child(agent).on(OF_AGENT, lambda a: calls.append("agent"))
    root.child(agent).on(BARE, lambda: calls.append("agent, no subject"))
    root.emit(OF_AGENT, agent)
    root.emit(OF_AGENT, other)
    root.emit(BARE)  # a hook without a subject is no agent's: scoped listeners miss it
    assert calls == ["global", "agent", "global"]


# ---------------------------------------------------------------------- specs


async def test_a_name_is_refused_where_a_spec_is_wanted() -> None:
    import dsh.hooks

    assert dsh.hooks.KERNEL_ERROR is KERNEL_ERROR
    root = Context()
    with pytest.raises(TypeError, match=r"'kernel/error': pass its spec, dsh\.hooks\.KERNEL_ERROR"):
        root.on("kernel/error", print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no hook of that name is declared; the core's are in dsh"):
        root.on("agent/nonsense", print)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"ctx.emit\(\) takes a hook spec, not the name 'kernel-test/e': pass "
        r"its spec, tests\.kernel\.test_context\.E",
    ):
        root.emit("kernel-test/e", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="hook spec"):
        await root.waterfall("kernel-test/w", 1, default=lambda v: v)  # type: ignore[arg-type]


async def test_a_spec_is_dispatched_only_in_its_own_style() -> None:
    root = Context()
    with pytest.raises(
        TypeError,
        match=r"'kernel-test/w' is a Chain hook: run it with ctx.waterfall\(\), not ctx.emit\(\)",
    ):
        root.emit(W, 1)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"is a Notify hook: run it with ctx.emit\(\), not ctx.serial"
    ):
        await root.serial(E, 1)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"is a First hook: run it with ctx.serial\(\), not ctx.parallel"
    ):
        await root.parallel(ASK)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"is a Gather hook: run it with ctx.parallel\(\), not ctx.waterfall"
    ):
        await root.waterfall(GATHER, 1, default=lambda v: v)  # type: ignore[arg-type]


async def test_a_hook_name_is_declared_once_and_well_formed() -> None:
    with pytest.raises(
        HookDeclarationError,
        match=r"'kernel-test/e' is declared twice: in tests.kernel.test_context and in tests.kernel.test_context",
    ):
        Notify("kernel-test/e")
    with pytest.raises(HookDeclarationError, match="'area/name'"):
        Notify("no-area")
    with pytest.raises(HookDeclarationError, match="'area/name'"):
        Chain("Agent/Upper")
    declared = Gather[[int], str]("kernel-test/declared-here")
    assert declared.name == "kernel-test/declared-here"
    assert declared.declared_in == __name__
    assert repr(declared) == "Gather('kernel-test/declared-here')"


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

    root.on(ASK, nothing)
    root.on(ASK, false)
    root.on(ASK, answer)
    root.on(ASK, lambda: calls.append("never"))
    assert await root.serial(ASK) == "stop here"
    assert calls == ["none", "false", "answer"]


async def test_serial_with_no_result_returns_none_and_propagates_errors() -> None:
    root = Context()
    assert await root.serial(ASK) is None  # no listener at all
    root.on(ASK, lambda: None)
    assert await root.serial(ASK) is None
    root.on(ASK, lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        await root.serial(ASK)


async def test_parallel_runs_concurrently_and_returns_results_in_listener_order() -> None:
    root = Context()
    started: list[str] = []
    gate = asyncio.Event()

    async def slow(name: str) -> str:
        started.append(name)
        await gate.wait()
        return name

    async def opener() -> str:
        started.append("opener")
        gate.set()
        return "opener"

    root.on(GATHER, lambda: slow("a"))
    root.on(GATHER, lambda: slow("b"))
    root.on(GATHER, opener)
    root.on(GATHER, lambda: "plain")  # a listener need not be async
    assert await asyncio.wait_for(root.parallel(GATHER), 60) == ["a", "b", "opener", "plain"]
    assert sorted(started) == ["a", "b", "opener"]


async def test_parallel_raises_the_first_failure_in_listener_order() -> None:
    root = Context()
    finished: list[str] = []

    async def fail(message: str) -> None:
        await asyncio.sleep(0)
        raise RuntimeError(message)

    async def fine() -> None:
        finished.append("fine")

    root.on(FAILING, lambda: fail("first"))
    root.on(FAILING, fine)
    root.on(FAILING, lambda: fail("second"))
    with pytest.raises(RuntimeError, match="first"):
        await root.parallel(FAILING)
    assert finished == ["fine"]  # the others still ran to the end


async def test_parallel_a_plain_listener_that_raises_lets_the_others_finish() -> None:
    """A listener that raises at once, without awaiting, is reported in listener
    order too, after the awaitable ones ran to their end."""
    root = Context()
    finished: list[str] = []

    def refuse() -> None:
        raise RuntimeError("plain")

    async def late(name: str) -> None:
        await asyncio.sleep(0)
        finished.append(name)

    root.on(FAILING, lambda: late("before"))
    root.on(FAILING, refuse)
    root.on(FAILING, lambda: late("after"))
    with pytest.raises(RuntimeError, match="plain"):
        await root.parallel(FAILING)
    assert finished == ["before", "after"]

    alone = Context()
    alone.on(FAILING, lambda: late("alone"))
    alone.on(FAILING, refuse)
    with pytest.raises(RuntimeError, match="plain"):
        await alone.parallel(FAILING)
    assert finished[-1] == "alone"


# ---------------------------------------------------------------------- waterfall


async def test_waterfall_nests_listeners_around_the_default() -> None:
    root = Context()
    trace: list[str] = []

    async def outer(value: int, next: Next[int, int]) -> int:
        trace.append("outer in")
        result = await next()
        trace.append("outer out")
        return result * 10

    async def inner(value: int, next: Next[int, int]) -> int:
        trace.append("inner in")
        return await next(value + 1)  # replaces the payload for the rest of the chain

    async def default(value: int) -> int:
        trace.append(f"default {value}")
        return value

    root.on(W, outer)
    root.on(W, inner)
    assert await root.waterfall(W, 1, default=default) == 20
    assert trace == ["outer in", "inner in", "default 2", "outer out"]


async def test_waterfall_short_circuits_when_next_is_not_called() -> None:
    root = Context()
    called: list[str] = []

    async def blocker(prompt: str, next: Next[str, str]) -> str:
        return "blocked"

    async def later(prompt: str, next: Next[str, str]) -> str:
        called.append("later")
        return await next()

    root.on(W, blocker)
    root.on(W, later)

    async def default(prompt: str) -> str:
        called.append("default")
        return prompt

    assert await root.waterfall(W, "hi", default=default) == "blocked"
    assert called == []


async def test_waterfall_without_listeners_is_the_default() -> None:
    root = Context()
    assert await root.waterfall(W, 3, default=lambda v: v * 2) == 6


async def test_next_takes_one_payload_at_most() -> None:
    root = Context()

    async def greedy(value: int, next: Any) -> int:
        return int(await next(1, 2))

    root.on(W, greedy)
    with pytest.raises(TypeError, match="one payload at most"):
        await root.waterfall(W, 0, default=lambda v: v)


async def test_a_waterfall_subject_comes_from_the_payload() -> None:
    of_payload: Chain[tuple[object, int], int] = Chain(
        "kernel-test/payload-subject", subject=lambda payload: payload[0]
    )
    root = Context()
    agent, other = object(), object()

    def add_ten(payload: tuple[object, int], next: Next[tuple[object, int], int]) -> Any:
        return next((payload[0], payload[1] + 10))

    root.child(agent).on(of_payload, add_ten)
    assert await root.waterfall(of_payload, (agent, 1), default=lambda p: p[1]) == 11
    assert await root.waterfall(of_payload, (other, 1), default=lambda p: p[1]) == 1


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
        child.on(E, lambda v: None)
    with pytest.raises(ContextDisposedError):
        child.provide(X, 1)
    with pytest.raises(ContextDisposedError):
        child.child()


async def test_agent_scope_unwinds_everything_it_registered() -> None:
    root = Context()
    agent = object()
    agent_ctx = root.child(agent, name="agent")
    calls: list[str] = []
    agent_ctx.on(OF_AGENT, lambda a: calls.append("agent listener"))
    agent_ctx.provide(WORKSPACE, "/tmp/x")
    tool_ctx = agent_ctx.child(name="agent tool")
    tool_ctx.effect(lambda: lambda: calls.append("tool undone"))
    assert tool_ctx.scope is agent

    root.emit(OF_AGENT, agent)
    await agent_ctx.dispose()
    root.emit(OF_AGENT, agent)
    assert calls == ["agent listener", "tool undone"]
    assert not agent_ctx.has(WORKSPACE)
    assert root.listener_count(OF_AGENT) == 0


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
