"""Hook specs: each hook point declared once, with its call style and its types.

A hook point is a module-level object of one of four classes, one per call style:

- :class:`Notify` (``ctx.emit``): every listener is called now; failures are contained
  and reported on ``kernel/error``; a listener's awaitable runs as a task its context
  owns. For facts: a status changed, an agent was created.
- :class:`Gather` (``ctx.parallel``): every listener awaited side by side; the results
  come back in listener order, or the first failure is raised. For work the caller
  waits on, and verdicts it combines.
- :class:`First` (``ctx.serial``): listeners awaited one by one; the first result
  other than None (or False) ends the chain and is returned. For questions one
  listener answers.
- :class:`Chain` (``ctx.waterfall``): listeners nest as middleware around a default
  step, ``listener(payload, next)``: ``await next()`` delegates, ``await
  next(replacement)`` delegates with another payload, returning without it
  short-circuits. For a value listeners may rewrite or replace.

The parameters are typed (``Notify[[AgentHandle, Status]]``, ``Chain[PreStep,
PreStepDecision]``), so a type checker holds listeners and dispatch calls to the
spec; at run time the dispatch methods refuse a spec of another style, and
``ctx.on`` refuses a name given as a string.

A spec may say whose event a dispatch is (``subject``: a function of the arguments,
usually the agent): listeners of an agent-scoped context hear only their agent's
events; global listeners hear every one. Constructing a spec declares its name; a
second declaration of the same name is refused, so two plugins cannot share a hook
point by accident.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, Protocol, TypeVar

from dsh.kernel.errors import HookDeclarationError

P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A")
A_contra = TypeVar("A_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)
L_contra = TypeVar("L_contra", bound=Callable[..., object], contravariant=True)

HOOK_NAME = re.compile(r"^[a-z][a-z0-9_-]*(/[a-z][a-z0-9_-]*)+$")

_declared: dict[str, Hook] = {}


class Next(Protocol[A_contra, R_co]):
    """The rest of a :class:`Chain`, as a listener receives it: call it with no argument
    to pass the payload on unchanged, or with a replacement."""

    def __call__(self, replacement: A_contra = ..., /) -> Awaitable[R_co]: ...


class Listens(Protocol[L_contra]):
    """A spec whose listeners may be of type ``L``: what ``ctx.on`` holds a listener to.

    Solving the spec's ParamSpec from the spec and the listener together lets a type
    checker accept a listener that does not fit; bounding the listener's type by the
    spec's, through this method's parameter, does not (a misfit then reads "Cannot
    infer value of type parameter")."""

    def _takes_listener(self, fn: L_contra, /) -> None: ...


class Hook:
    """What every spec has: a declared name, a call style, whose event it is, a summary."""

    dispatch: ClassVar[str]
    """The ``Context`` method that runs hooks of this style."""

    __slots__ = ("declared_in", "doc", "name", "subject")
    name: str
    subject: Callable[..., object] | None
    doc: str
    declared_in: str
    """The module that declared it."""

    def __init__(self, name: str, subject: Callable[..., object] | None, doc: str) -> None:
        if not HOOK_NAME.match(name):
            raise HookDeclarationError(
                f"hook name {name!r} must be 'area/name' (lower case; matching {HOOK_NAME.pattern})"
            )
        module = _declaring_module()
        earlier = _declared.get(name)
        if earlier is not None:
            raise HookDeclarationError(
                f"hook {name!r} is declared twice: in {earlier.declared_in} and in {module}"
            )
        self.name = name
        self.subject = subject
        self.doc = doc
        self.declared_in = module
        _declared[name] = self

    def subject_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object | None:
        """Whose event a dispatch with these arguments is; None is no agent's, heard only
        by global listeners."""
        return None if self.subject is None else self.subject(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Notify(Hook, Generic[P]):
    """Listeners ``fn(*args)`` called at once by ``ctx.emit``; see the module docstring."""

    dispatch = "emit"
    __slots__ = ()

    if TYPE_CHECKING:

        def _takes_listener(self, fn: Callable[P, object], /) -> None: ...

    def __init__(
        self, name: str, *, subject: Callable[P, object] | None = None, doc: str = ""
    ) -> None:
        super().__init__(name, subject, doc)


class Gather(Hook, Generic[P, R]):
    """Listeners ``fn(*args) -> R`` awaited side by side by ``ctx.parallel``, which
    returns their results in listener order."""

    dispatch = "parallel"
    __slots__ = ()

    if TYPE_CHECKING:

        def _takes_listener(self, fn: Callable[P, Awaitable[R] | R], /) -> None: ...

    def __init__(
        self, name: str, *, subject: Callable[P, object] | None = None, doc: str = ""
    ) -> None:
        super().__init__(name, subject, doc)


class First(Hook, Generic[P, R]):
    """Listeners ``fn(*args) -> R | None`` awaited in order by ``ctx.serial`` until one
    answers (a result other than None or False)."""

    dispatch = "serial"
    __slots__ = ()

    if TYPE_CHECKING:

        def _takes_listener(self, fn: Callable[P, Awaitable[R | None] | R | None], /) -> None: ...

    def __init__(
        self, name: str, *, subject: Callable[P, object] | None = None, doc: str = ""
    ) -> None:
        super().__init__(name, subject, doc)


class Chain(Hook, Generic[A, R]):
    """Listeners ``fn(payload, next) -> R`` nested around a default by ``ctx.waterfall``."""

    dispatch = "waterfall"
    __slots__ = ()

    if TYPE_CHECKING:

        def _takes_listener(self, fn: Callable[[A, Next[A, R]], Awaitable[R] | R], /) -> None: ...

    def __init__(
        self, name: str, *, subject: Callable[[A], object] | None = None, doc: str = ""
    ) -> None:
        super().__init__(name, subject, doc)


def check_hook(hook: object, style: type[Hook], method: str) -> Hook:
    """``hook`` as a spec that ``method`` may use; a clear TypeError otherwise."""
    if isinstance(hook, style):
        return hook
    if isinstance(hook, Hook):
        raise TypeError(
            f"{hook.name!r} is a {type(hook).__name__} hook: run it with "
            f"ctx.{hook.dispatch}(), not ctx.{method}()"
        )
    raise TypeError(f"ctx.{method}() takes a hook spec, not {_describe(hook)}")


def spec_of(hook: object, method: str) -> Hook:
    """``hook`` as a spec for ``ctx.on`` and the like; a clear TypeError otherwise."""
    if isinstance(hook, Hook):
        return hook
    raise TypeError(f"ctx.{method}() takes a hook spec, not {_describe(hook)}")


def _describe(value: object) -> str:
    if isinstance(value, str):
        spec = _declared.get(value)
        if spec is not None:
            return f"the name {value!r}: pass its spec, {_spelled(spec)}"
        return f"the name {value!r} (no hook of that name is declared; the core's are in dsh.hooks)"
    return f"{type(value).__name__} {value!r}"


def _spelled(spec: Hook) -> str:
    """How a plugin names ``spec``: the constant bound to it in the core's public list of
    hooks, else in the module that declared it."""
    for where in ("dsh.hooks", spec.declared_in):
        module = sys.modules.get(where)
        for name, value in vars(module).items() if module is not None else ():
            if value is spec:
                return f"{where}.{name}"
    return f"declared in {spec.declared_in}"


def _declaring_module() -> str:
    """The module whose code constructed the spec being declared."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") in (__name__, "typing"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "?"))
