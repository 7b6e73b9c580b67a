"""The kernel context: services by typed key, hooks in four call styles, scoped disposal.

Every context belongs to one tree that shares its services and listeners (the hub).
Each context owns the effects registered through it; disposing it undoes them once,
newest first, and a disposed context refuses further registrations. A context whose
``scope`` is an object (an agent) sees its own services before the global ones, and
its listeners run only for dispatches whose subject (see :mod:`dsh.kernel.hooks`) is
that object.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, cast, overload

from dsh.kernel.errors import ContextDisposedError, ServiceConflictError, ServiceNotFoundError
from dsh.kernel.hooks import Chain, First, Gather, Hook, Listens, Notify, check_hook, spec_of

Disposer: TypeAlias = Callable[[], "Awaitable[None] | None"]
"""Undoes one registration. Calling it twice is harmless; it may return an awaitable."""

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
D = TypeVar("D")
A = TypeVar("A")
R = TypeVar("R")
P = ParamSpec("P")
L = TypeVar("L", bound=Callable[..., object])
_log = logging.getLogger("dsh.kernel")


@dataclass(frozen=True)
class ReportedError:
    """A failure the kernel contained instead of raising: a listener, a disposer, a task."""

    origin: str  # "listener", "dispose" or "task"
    event: str | None  # the hook whose listener failed, when origin == "listener"
    owner: str  # name of the context that registered the failing code
    error: BaseException


KERNEL_ERROR: Notify[[ReportedError]] = Notify(
    "kernel/error", doc="a failure the kernel contained (a listener, a disposer, a task)"
)


class ServiceKey(Generic[T]):
    """The typed key a service is provided and found under: ``ctx.get(TOOLS)`` is what
    ``TOOLS`` says. ``T`` is what callers get: a service that binds to its caller (see
    :class:`ContextBound`) is provided as itself and found as its view."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"

    # Two keys of one name are one service: the name is what the hub holds.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServiceKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash((ServiceKey, self.name))


class ContextBound(Protocol[T_co]):
    """A service that hands each calling context its own view, so registrations it
    makes on the caller's behalf are owned (and undone) by the caller."""

    def bind_context(self, ctx: Context) -> T_co: ...


@dataclass(eq=False)
class _Listener:
    fn: Callable[..., Any]
    ctx: Context


@dataclass(eq=False)
class _ServiceEntry:
    value: Any
    ctx: Context


class _Hub:
    """State shared by every context of one tree."""

    def __init__(self) -> None:
        self.services: dict[str, list[_ServiceEntry]] = {}
        self.listeners: dict[Hook, list[_Listener]] = {}


_INHERIT: Any = object()
_MISSING: Any = object()


def _key_name(key: ServiceKey[Any], method: str) -> str:
    if isinstance(key, ServiceKey):
        return key.name
    hint = " (the core's keys are in dsh.services)" if isinstance(key, str) else ""
    raise TypeError(f"ctx.{method}() takes a ServiceKey, not {key!r}{hint}")


class Context:
    """One owner of registrations. See the module docstring."""

    __slots__ = (
        "__weakref__",
        "_counter",
        "_disposed",
        "_effects",
        "_hub",
        "_parent",
        "_parent_key",
        "name",
        "scope",
    )

    def __init__(
        self,
        *,
        hub: _Hub | None = None,
        parent: Context | None = None,
        scope: object | None = None,
        name: str = "root",
    ) -> None:
        self._hub = hub if hub is not None else _Hub()
        self._parent = parent
        self._parent_key: int | None = None
        self.scope = scope
        self.name = name
        self._effects: dict[int, Disposer] = {}
        self._counter = itertools.count()
        self._disposed = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def disposed(self) -> bool:
        return self._disposed

    @property
    def parent(self) -> Context | None:
        return self._parent

    def child(self, scope: object | None = _INHERIT, *, name: str | None = None) -> Context:
        """A context owned by this one: disposed with it, or earlier on its own.

        ``scope`` defaults to this context's scope; pass an agent to make an agent scope.
        """
        self._check_live()
        child = Context(
            hub=self._hub,
            parent=self,
            scope=self.scope if scope is _INHERIT else scope,
            name=name if name is not None else self.name,
        )
        child._parent_key = self._add_effect_key(child.dispose)
        return child

    def effect(self, setup: Callable[[], Disposer]) -> Disposer:
        """Run ``setup`` now and undo it (with the disposer it returns) when this context goes."""
        self._check_live()
        return self._add_effect(setup())

    def spawn(self, work: Awaitable[T], *, name: str | None = None) -> asyncio.Task[T]:
        """Start a task this context owns: cancelled and awaited when it is disposed,
        its failure reported rather than lost."""
        self._check_live()
        return self._own_task(work, name, None)

    def _own_task(self, work: Awaitable[T], name: str | None, event: str | None) -> asyncio.Task[T]:

        async def run() -> T:
            return await work

        task: asyncio.Task[T] = asyncio.ensure_future(work if inspect.iscoroutine(work) else run())
        if name is not None:
            task.set_name(name)

        async def stop() -> None:
            if not task.done():
                task.cancel()
                # The task's own cancellation is expected; anything else it raised was
                # already reported by the done callback.
                await asyncio.gather(task, return_exceptions=True)

        key = self._add_effect_key(stop)

        def done(t: asyncio.Task[T]) -> None:
            self._effects.pop(key, None)
            if not t.cancelled() and t.exception() is not None:
                origin = "listener" if event is not None else "task"
                self._report(origin, event, self.name, cast(BaseException, t.exception()))

        task.add_done_callback(done)
        return task

    async def dispose(self) -> None:
        """Undo every effect of this context once, newest first. Failures are reported."""
        if self._disposed:
            return
        self._disposed = True
        while self._effects:
            _, undo = self._effects.popitem()  # dicts pop LIFO
            try:
                result = undo()
                if inspect.isawaitable(result):
                    await result
            except Exception as error:
                self._report("dispose", None, self.name, error)
        if self._parent is not None and self._parent_key is not None:
            self._parent._effects.pop(self._parent_key, None)

    # ------------------------------------------------------------------ services

    def provide(self, key: ServiceKey[T], service: T | ContextBound[T]) -> Disposer:
        """Provide ``service`` under ``key`` in this context's scope until disposed."""
        self._check_live()
        name = _key_name(key, "provide")
        entries = self._hub.services.setdefault(name, [])
        if any(entry.ctx.scope is self.scope for entry in entries):
            raise ServiceConflictError(name)
        entry = _ServiceEntry(service, self)
        entries.append(entry)

        def withdraw() -> None:
            if entry in entries:
                entries.remove(entry)

        return self._add_effect(withdraw)

    @overload
    def get(self, key: ServiceKey[T]) -> T: ...
    @overload
    def get(self, key: ServiceKey[T], default: D) -> T | D: ...
    def get(self, key: ServiceKey[Any], default: Any = _MISSING) -> Any:
        """The service under ``key``: this scope's own first, else the global one."""
        name = _key_name(key, "get")
        found: _ServiceEntry | None = None
        for entry in self._hub.services.get(name, ()):
            if entry.ctx.scope is self.scope:
                found = entry
                break
            if entry.ctx.scope is None:
                found = entry
        if found is None:
            if default is _MISSING:
                raise ServiceNotFoundError(name)
            return default
        bind = getattr(found.value, "bind_context", None)
        return bind(self) if callable(bind) else found.value

    def has(self, key: ServiceKey[Any]) -> bool:
        return self.get(key, None) is not None

    # ------------------------------------------------------------------ hooks

    def on(self, hook: Listens[L], fn: L, *, prepend: bool = False) -> Disposer:
        """Listen to ``hook`` until this context is disposed. ``prepend`` runs it first."""
        spec = spec_of(hook, "on")
        self._check_live()
        listeners = self._hub.listeners.setdefault(spec, [])
        listener = _Listener(fn, self)
        if prepend:
            listeners.insert(0, listener)
        else:
            listeners.append(listener)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return self._add_effect(remove)

    def emit(self, hook: Notify[P], *args: P.args, **kwargs: P.kwargs) -> None:
        """Call every listener now. Never raises: failures are reported on ``kernel/error``.
        A listener that returns an awaitable gets it run as a task its context owns."""
        spec = check_hook(hook, Notify, "emit")
        for listener in self._listeners(spec, spec.subject_of(args, kwargs)):
            try:
                result = listener.fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    listener.ctx._spawn_listener(spec.name, result)
            except Exception as error:
                self._report("listener", spec.name, listener.ctx.name, error)

    async def parallel(self, hook: Gather[P, R], *args: P.args, **kwargs: P.kwargs) -> list[R]:
        """Await every listener concurrently; their results in listener order, or the
        first failure (in listener order) raised once all have finished."""
        spec = check_hook(hook, Gather, "parallel")

        async def call(listener: _Listener) -> R:
            result = listener.fn(*args, **kwargs)
            if inspect.isawaitable(result):
                return cast(R, await result)
            return cast(R, result)

        outcomes = await asyncio.gather(
            *(call(listener) for listener in self._listeners(spec, spec.subject_of(args, kwargs))),
            return_exceptions=True,
        )
        results: list[R] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        return results

    async def serial(self, hook: First[P, R], *args: P.args, **kwargs: P.kwargs) -> R | None:
        """Await listeners one by one; the first result other than None or False stops
        the chain and is returned."""
        spec = check_hook(hook, First, "serial")
        for listener in self._listeners(spec, spec.subject_of(args, kwargs)):
            result = listener.fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            if result is not None and result is not False:
                return cast(R, result)
        return None

    async def waterfall(
        self, hook: Chain[A, R], payload: A, *, default: Callable[[A], Awaitable[R] | R]
    ) -> R:
        """Run listeners as nested middleware: each is called ``fn(payload, next)``.

        Awaiting ``next()`` delegates to the next listener (``next(replacement)`` hands
        it another payload); returning without it short-circuits. ``default`` is the
        innermost step, called with the payload as it reached it.
        """
        spec = check_hook(hook, Chain, "waterfall")
        chain = self._listeners(spec, spec.subject_of((payload,), {}))

        async def run(index: int, current: A) -> R:
            if index == len(chain):
                result = default(current)
            else:

                async def next_(*replacement: A) -> R:
                    if len(replacement) > 1:
                        raise TypeError(f"next() of {spec.name!r} takes one payload at most")
                    return await run(index + 1, replacement[0] if replacement else current)

                result = chain[index].fn(current, next_)
            if inspect.isawaitable(result):
                return cast(R, await result)
            return result

        return await run(0, payload)

    def listener_count(self, hook: Hook) -> int:
        return len(self._hub.listeners.get(spec_of(hook, "listener_count"), ()))

    # ------------------------------------------------------------------ internals

    def _listeners(self, hook: Hook, subject: object | None) -> list[_Listener]:
        # A snapshot: listeners added or removed during dispatch take effect next time.
        return [
            listener
            for listener in self._hub.listeners.get(hook, ())
            if listener.ctx.scope is None or listener.ctx.scope is subject
        ]

    def _spawn_listener(self, event: str, work: Awaitable[Any]) -> None:
        if self._disposed:
            if inspect.iscoroutine(work):
                work.close()
            return
        self._own_task(work, f"listener:{event}", event)

    def _check_live(self) -> None:
        if self._disposed:
            raise ContextDisposedError(f"context {self.name!r} has been disposed")

    def _add_effect_key(self, undo: Disposer) -> int:
        key = next(self._counter)
        self._effects[key] = undo
        return key

    def _add_effect(self, undo: Disposer) -> Disposer:
        key = self._add_effect_key(undo)

        def disposer() -> Awaitable[None] | None:
            pending = self._effects.pop(key, None)
            return pending() if pending is not None else None

        return disposer

    def _report(self, origin: str, event: str | None, owner: str, error: BaseException) -> None:
        _log.error(
            "%s failure in %r%s", origin, owner, f" on {event!r}" if event else "", exc_info=error
        )
        if event == KERNEL_ERROR.name:
            return  # never report a failing error listener through itself
        self.emit(KERNEL_ERROR, ReportedError(origin, event, owner, error))
