"""The system prompt: ordered sections, strict ``{{variables}}``, tool schemas, and the
dynamic context entries kept out of the cacheable prompt.

Provide a :class:`PromptService` under ``dsh.services.PROMPT``; each context that
reaches it gets a :class:`PromptView` bound to itself, so the sections, variables and
context entries it registers go when it does, and those registered from an agent
scope shadow the global ones of the same name for that agent only. The loop calls
``assemble`` once per step::

    prompt = ctx.get(PROMPT)
    prompt.section("persona", 0, "You answer in {{language}}.")
    prompt.variable("language", lambda pc: "English")
    prompt.context("clock", 90, lambda pc: f"Time: {now()}")

The system text and the tool list should stay byte-identical from step to step, since
DeepSeek bills a cached prompt prefix at a fraction of the price; facts that change
(the date, git status, instruction files) belong in context entries, which the loop
enters as user messages only when their text changes.

This module is public API.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dsh.agent_handle import AgentHandle
from dsh.kernel import Chain, Context, Disposer, ScopedRegistry, ServiceKey
from dsh.llm import ToolSchema
from dsh.permission_modes import PLAN_MODE_TEXT, PermissionMode

# Re-exported because dsh.paths is not public API and user-level prompt files
# ($DSH_HOME/AGENTS.md) live there.

__all__ = [
    "IDENTITY",
    "Assembly",
    "AssemblyDraft",
    "ContextEntry",
    "PromptContext",
    "PromptError",
    "PromptService",
    "PromptView",
    "Render",
    "Section",
    "VariableFn",
    "per_workspace",
    "register_core_sections",
]

T = TypeVar("T")

IDENTITY = (
    "You are dsh, a coding agent working in the user's terminal and repository, with "
    "tools to read and edit files and run commands; be concise, and verify your work."
)

_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Any {{...}} on one line is a reference; what it names must be a known variable.
_REFERENCE = re.compile(r"\{\{(.*?)\}\}")


class PromptError(Exception):
    """A section could not be rendered: an unknown variable, or a renderer that failed.

    ``section`` names the section (or context entry), ``variable`` the variable involved.
    """

    def __init__(self, message: str, *, section: str, variable: str | None = None) -> None:
        super().__init__(message)
        self.section = section
        self.variable = variable


@dataclass(frozen=True)
class PromptContext:
    """What a renderer may know about the request being assembled."""

    agent: AgentHandle | None
    """The agent the request is for; None outside any agent (a test)."""
    scope: object | None
    """The scope whose sections are visible (the agent), or None for globals only."""
    cwd: Path
    provider: str
    model: str
    workspace: Hashable | None = None
    """Changes whenever the files under ``cwd`` may have changed since the last
    assembly: at each turn (the person may have edited them in between) and after each
    step that ran a tool with effects (an edit, a command). None: unknown. See
    :func:`per_workspace`."""


Render = Callable[[PromptContext], "str | Awaitable[str | None] | None"]
"""Renders a section or context entry; None or blank text leaves it out."""

VariableFn = Callable[[PromptContext], str]


@dataclass(frozen=True)
class Section:
    """Part of the system prompt. Its text, given or rendered, is interpolated, so a
    renderer passing on outside text that may hold ``{{`` (a file) fails the assembly:
    such text belongs in a context entry, which is never interpolated."""

    name: str
    order: int
    text: str | Render
    complete: bool = False
    """A visible complete section is the whole prompt: every other section is left out."""


@dataclass(frozen=True)
class ContextEntry:
    """A dynamic fact the loop enters as a user message whenever its text changes."""

    name: str
    order: int
    text: Render
    form: str = "snapshot"
    """The ``PluginSource.form`` of the message, a hint for how a UI shows it."""


@dataclass(frozen=True)
class Assembly:
    system: str
    tools: tuple[ToolSchema, ...]
    context: tuple[tuple[str, str, str], ...]
    """(name, form, text) of each context entry with text, in (order, name) order."""


@dataclass(frozen=True)
class AssemblyDraft:
    """What ``system-prompt/assemble`` listeners get: the assembly so far, and the
    request it is for."""

    assembly: Assembly
    context: PromptContext


_BUILTIN_VARIABLES: dict[str, VariableFn] = {
    "model": lambda pc: pc.model,
    "provider": lambda pc: pc.provider,
    "cwd": lambda pc: str(pc.cwd),
}


class PromptService:
    """Holds the sections, variables and context entries; see the module docstring.

    ``tools`` lists the schemas visible to a scope. They are sorted by name, or, when
    ``tool_order`` is given, its names first in its order and the rest by name: the
    order must not depend on registration order, or a plugin reload would break the
    provider's prompt cache.
    """

    def __init__(
        self,
        ctx: Context,
        tools: Callable[[object | None], Sequence[ToolSchema]] | None = None,
        tool_order: Sequence[str] | None = None,
    ) -> None:
        self._ctx = ctx
        self.tools = tools
        self.tool_order: tuple[str, ...] | None = (
            tuple(tool_order) if tool_order is not None else None
        )
        self.sections: ScopedRegistry[Section] = ScopedRegistry("prompt section")
        self.variables: ScopedRegistry[VariableFn] = ScopedRegistry("prompt variable")
        self.contexts: ScopedRegistry[ContextEntry] = ScopedRegistry("prompt context entry")

    def bind_context(self, ctx: Context) -> PromptView:
        return PromptView(self, ctx)

    async def assemble(self, pc: PromptContext) -> Assembly:
        sections = sorted(self.sections.visible(pc.scope).values(), key=lambda s: (s.order, s.name))
        entries = sorted(self.contexts.visible(pc.scope).values(), key=lambda e: (e.order, e.name))
        variables: dict[str, str] = {}  # each variable computed once per assembly

        # Renderers run concurrently: a context entry may wait on a subprocess or a file.
        # One that answers at once (a plain-text section, a plain function) needs no task.
        rendered: list[str | None] = []
        waiting: dict[int, _Pending] = {}
        try:
            for section in sections:
                if isinstance(section.text, str):
                    rendered.append(self._plain(section, pc, variables))
                    continue
                raw = _begin(section.name, "section", section.text, pc)
                if isinstance(raw, _Pending):
                    waiting[len(rendered)] = raw
                    raw = None
                rendered.append(self._interpolated(section, raw, pc, variables))
            for entry in entries:
                text = _begin(entry.name, "context entry", entry.text, pc)
                if isinstance(text, _Pending):
                    waiting[len(rendered)] = text
                    text = None
                rendered.append(text)
        except BaseException:
            for pending in waiting.values():
                pending.close()
            raise
        if waiting:
            done = await _gather_or_cancel([pending.finish() for pending in waiting.values()])
            for at, text in zip(waiting, done, strict=True):
                is_section = at < len(sections)
                rendered[at] = (
                    self._interpolated(sections[at], text, pc, variables) if is_section else text
                )
        shown = [
            (section, text)
            for section, text in zip(sections, rendered[: len(sections)], strict=True)
            if text is not None
        ]
        complete = next((text for section, text in shown if section.complete), None)
        system = complete if complete is not None else "\n\n".join(text for _, text in shown)
        context = tuple(
            (entry.name, entry.form, text)
            for entry, text in zip(entries, rendered[len(sections) :], strict=True)
            if text is not None
        )
        assembly = Assembly(system=system, tools=self._ordered_tools(pc.scope), context=context)

        result = await self._ctx.waterfall(
            SYSTEM_PROMPT_ASSEMBLE,
            AssemblyDraft(assembly, pc),
            default=lambda draft: draft.assembly,
        )
        if not isinstance(result, Assembly):
            raise TypeError(
                f"a {SYSTEM_PROMPT_ASSEMBLE.name} listener returned {type(result).__name__}, "
                "not an Assembly"
            )
        return result

    def _ordered_tools(self, scope: object | None) -> tuple[ToolSchema, ...]:
        if self.tools is None:
            return ()
        by_name = sorted(self.tools(scope), key=lambda tool: tool.name)
        if self.tool_order is None:
            return tuple(by_name)
        rank = {name: index for index, name in enumerate(self.tool_order)}
        listed = sorted((t for t in by_name if t.name in rank), key=lambda t: rank[t.name])
        return (*listed, *(t for t in by_name if t.name not in rank))

    def _plain(self, section: Section, pc: PromptContext, variables: dict[str, str]) -> str | None:
        assert isinstance(section.text, str)
        return self._interpolate(section.name, section.text, pc, variables).strip() or None

    def _interpolated(
        self, section: Section, raw: str | None, pc: PromptContext, variables: dict[str, str]
    ) -> str | None:
        if raw is None:
            return None
        text = self._interpolate(section.name, raw, pc, variables)
        return text.strip() or None

    def _interpolate(
        self, section: str, text: str, pc: PromptContext, variables: dict[str, str]
    ) -> str:
        if "{{" not in text:
            return text

        def value(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name not in variables:
                fn = self.variables.get(name, pc.scope) or _BUILTIN_VARIABLES.get(name)
                if fn is None:
                    raise PromptError(
                        f"section {section!r} uses unknown variable {name!r}",
                        section=section,
                        variable=name,
                    )
                try:
                    result = fn(pc)
                except Exception as error:
                    raise PromptError(
                        f"variable {name!r} (used by section {section!r}) failed: {error}",
                        section=section,
                        variable=name,
                    ) from error
                if not isinstance(result, str):
                    raise PromptError(
                        f"variable {name!r} (used by section {section!r}) gave "
                        f"{type(result).__name__}, not str",
                        section=section,
                        variable=name,
                    )
                variables[name] = result
            return variables[name]

        # One pass: a value that itself contains {{...}} is inserted literally.
        return _REFERENCE.sub(value, text)


class PromptView:
    """The prompt service as one context sees it and registers into it."""

    __slots__ = ("_ctx", "_service")

    def __init__(self, service: PromptService, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    @property
    def service(self) -> PromptService:
        return self._service

    def section(
        self, name: str, order: int, text: str | Render, *, complete: bool = False
    ) -> Disposer:
        """Add a section, owned by this view's context; returns its disposer."""
        return self.add_section(Section(name, order, text, complete))

    def add_section(self, section: Section) -> Disposer:
        return self._service.sections.add(self._ctx, section.name, section)

    def variable(self, name: str, fn: VariableFn) -> Disposer:
        """Add a variable for ``{{name}}``; it may shadow a built-in (model, provider, cwd)."""
        if not _VARIABLE_NAME.match(name):
            raise ValueError(f"prompt variable name {name!r} must match {_VARIABLE_NAME.pattern}")
        return self._service.variables.add(self._ctx, name, fn)

    def context(self, name: str, order: int, text: Render, *, form: str = "snapshot") -> Disposer:
        """Add a context entry, owned by this view's context; returns its disposer."""
        return self.add_context(ContextEntry(name, order, text, form))

    def add_context(self, entry: ContextEntry) -> Disposer:
        return self._service.contexts.add(self._ctx, entry.name, entry)

    def visible_sections(self) -> dict[str, Section]:
        return self._service.sections.visible(self._ctx.scope)

    async def assemble(self, pc: PromptContext) -> Assembly:
        return await self._service.assemble(pc)


def register_core_sections(
    view: PromptView, mode: Callable[[], PermissionMode] | None = None
) -> Disposer:
    """Register the built-in sections through ``view``: the one-line identity, and,
    given the permission mode's getter, what plan mode asks of the model (last, and
    only while the mode is ``plan``, so the cached prefix of the prompt is the same
    in every mode and the prompt is byte-stable while the mode does not change)."""
    identity = view.section("identity", -100, IDENTITY)
    if mode is None:
        return identity

    def planning(pc: PromptContext) -> str | None:
        return PLAN_MODE_TEXT if mode() == "plan" else None

    plan = view.section("plan-mode", 10_000, planning)

    def dispose() -> None:
        plan()
        identity()

    return dispose


def per_workspace(render: Render) -> Callable[[PromptContext], Awaitable[str | None]]:
    """``render``, run again for an agent only when its working directory or
    ``pc.workspace`` changed: for a renderer that reads the files (instructions, a
    catalog, ``git status``), which a step after read-only tools could only read the same
    again, at the price of a thread or a process. Nothing is reused without a scope or a
    workspace value, nor after a failure."""
    seen: weakref.WeakKeyDictionary[Any, tuple[Hashable, str | None]] = weakref.WeakKeyDictionary()

    async def reused(pc: PromptContext) -> str | None:
        key = (str(pc.cwd), pc.workspace)
        scope = pc.scope
        if scope is not None and pc.workspace is not None:
            try:
                last = seen.get(scope)
            except TypeError:  # a scope that cannot be weakly referenced: no reuse
                scope = None
            else:
                if last is not None and last[0] == key:
                    return last[1]
        result = render(pc)
        text = await result if inspect.isawaitable(result) else result
        if scope is not None and pc.workspace is not None:
            seen[scope] = (key, text)
        return text

    return reused


def _begin(name: str, kind: str, fn: Render, pc: PromptContext) -> str | _Pending | None:
    """What ``fn`` renders, or, when it must be awaited, what is left to await."""
    try:
        result = fn(pc)
    except PromptError:
        raise
    except Exception as error:
        raise PromptError(f"{kind} {name!r} failed: {error!r}", section=name) from error
    if inspect.isawaitable(result):
        return _Pending(name, kind, result)
    return _checked(name, kind, result)


@dataclass(frozen=True)
class _Pending:
    """A renderer's answer still to be awaited."""

    name: str
    kind: str
    awaitable: Awaitable[str | None]

    async def finish(self) -> str | None:
        try:
            result = await self.awaitable
        except PromptError:
            raise
        except Exception as error:
            raise PromptError(
                f"{self.kind} {self.name!r} failed: {error!r}", section=self.name
            ) from error
        return _checked(self.name, self.kind, result)

    def close(self) -> None:
        """Never to be awaited (another renderer failed first): a coroutine is closed,
        so that nothing warns it was never awaited."""
        if inspect.iscoroutine(self.awaitable):
            self.awaitable.close()


def _checked(name: str, kind: str, result: object) -> str | None:
    if result is None:
        return None
    if not isinstance(result, str):
        raise PromptError(
            f"{kind} {name!r} rendered {type(result).__name__}, not str or None", section=name
        )
    return result.strip() or None


async def _gather_or_cancel(works: list[Coroutine[Any, Any, T]]) -> list[T]:
    """``asyncio.gather``, but the first failure cancels the rest instead of leaving
    them running unowned."""
    tasks = [asyncio.ensure_future(work) for work in works]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


SYSTEM_PROMPT_ASSEMBLE: Chain[AssemblyDraft, Assembly] = Chain(
    "system-prompt/assemble",
    subject=lambda draft: draft.context.scope,
    doc="the assembled system prompt, tools and context entries of a request",
)


PROMPT: ServiceKey[PromptView] = ServiceKey("prompt")
"""System prompt sections, variables and context entries."""
