"""The system-prompt service: sections, variables, tools, context entries, the waterfall."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import warnings
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from dsh.hooks import SYSTEM_PROMPT_ASSEMBLE
from dsh.kernel import Context, Disposer, Next, RegistrationConflictError
from dsh.llm import ToolSchema
from dsh.prompt import (
    IDENTITY,
    Assembly,
    AssemblyDraft,
    PromptContext,
    PromptError,
    PromptService,
    PromptView,
    per_workspace,
    register_core_sections,
)
from dsh.services import PROMPT


def prompt_root(
    tools: Callable[[object | None], list[ToolSchema]] | None = None,
    tool_order: list[str] | None = None,
) -> tuple[Context, PromptView]:
    root = Context()
    root.provide(PROMPT, PromptService(root, tools=tools, tool_order=tool_order))
    return root, root.get(PROMPT)


def pc(scope: object | None = None, **changes: Any) -> PromptContext:
    base = PromptContext(
        agent=scope, scope=scope, cwd=Path("/work/repo"), provider="deepseek", model="v4"
    )
    return dataclasses.replace(base, **changes)


async def undo(dispose: Disposer) -> None:
    result = dispose()
    if result is not None:
        await result


def tool(name: str) -> ToolSchema:
    return ToolSchema(name=name, description=f"the {name} tool", parameters={"type": "object"})


async def test_sections_join_by_order_then_name_with_a_blank_line() -> None:
    _, prompt = prompt_root()
    prompt.section("tools-b", 100, "B guidance")
    prompt.section("persona", 0, "Persona.\n")
    prompt.section("tools-a", 100, "A guidance")
    register_core_sections(prompt)

    assembly = await prompt.assemble(pc())
    assert assembly.system == f"{IDENTITY}\n\nPersona.\n\nA guidance\n\nB guidance"
    assert assembly.tools == ()
    assert assembly.context == ()


async def test_identity_is_one_short_line() -> None:
    assert "\n" not in IDENTITY
    assert "dsh" in IDENTITY
    assert len(IDENTITY) < 200


async def test_sections_rendering_none_or_blank_are_left_out() -> None:
    _, prompt = prompt_root()

    async def later(_: PromptContext) -> str:
        await asyncio.sleep(0)
        return "async text"

    prompt.section("a", 1, "first")
    prompt.section("none", 2, lambda _: None)
    prompt.section("blank", 3, lambda _: "  \n ")
    prompt.section("empty", 4, "")
    prompt.section("async", 5, later)
    prompt.section("empty-variable", 6, "{{nothing}}")
    prompt.variable("nothing", lambda _: "")

    assert (await prompt.assemble(pc())).system == "first\n\nasync text"


async def test_a_complete_section_is_the_whole_prompt() -> None:
    _, prompt = prompt_root()
    register_core_sections(prompt)
    prompt.section("persona", 0, "Persona.")
    prompt.section("takeover", 50, "Only me.", complete=True)
    prompt.section("also-complete", 20, "Lowest order wins.", complete=True)
    assert (await prompt.assemble(pc())).system == "Lowest order wins."


async def test_a_complete_section_rendering_nothing_replaces_nothing() -> None:
    _, prompt = prompt_root()
    prompt.section("persona", 0, "Persona.")
    prompt.section("takeover", 50, lambda _: None, complete=True)
    assert (await prompt.assemble(pc())).system == "Persona."


async def test_builtin_and_registered_variables_interpolate() -> None:
    _, prompt = prompt_root()
    prompt.variable("language", lambda _: "English")
    prompt.section("facts", 0, "{{ model }} via {{provider}} in {{cwd}}, answering in {{language}}")
    prompt.section("plain", 1, "no templates: {single} braces } {{ unclosed")
    system = (await prompt.assemble(pc())).system
    assert system == (
        "v4 via deepseek in /work/repo, answering in English\n\n"
        "no templates: {single} braces } {{ unclosed"
    )


async def test_values_are_inserted_literally_and_computed_once() -> None:
    _, prompt = prompt_root()
    calls: list[str] = []

    def name(_: PromptContext) -> str:
        calls.append("name")
        return "{{model}}"

    prompt.variable("name", name)
    prompt.section("a", 0, "{{name}}")
    prompt.section("b", 1, lambda _: "again {{name}}")
    assert (await prompt.assemble(pc())).system == "{{model}}\n\nagain {{model}}"
    assert calls == ["name"]


async def test_an_unknown_variable_names_the_section_and_the_variable() -> None:
    _, prompt = prompt_root()
    prompt.section("persona", 0, "Hello {{model}}, from {{ usr }}.")
    with pytest.raises(PromptError, match="section 'persona' uses unknown variable 'usr'") as err:
        await prompt.assemble(pc())
    assert err.value.section == "persona"
    assert err.value.variable == "usr"


async def test_rendered_text_is_interpolated_strictly_too() -> None:
    _, prompt = prompt_root()
    prompt.section("dynamic", 0, lambda _: "{{missing}}")
    with pytest.raises(PromptError, match=r"'dynamic'.*'missing'"):
        await prompt.assemble(pc())


async def test_failing_renderers_and_variables_are_named() -> None:
    _, prompt = prompt_root()

    def broken(_: PromptContext) -> str:
        raise RuntimeError("boom")

    dispose = prompt.section("broken", 0, broken)
    with pytest.raises(PromptError, match="section 'broken' failed") as err:
        await prompt.assemble(pc())
    assert isinstance(err.value.__cause__, RuntimeError)
    await undo(dispose)

    prompt.variable("bad", broken)
    prompt.section("user", 0, "{{bad}}")
    with pytest.raises(PromptError, match=r"variable 'bad'.*section 'user'"):
        await prompt.assemble(pc())


async def test_a_failing_renderer_cancels_the_others() -> None:
    _, prompt = prompt_root()
    cancelled = asyncio.Event()

    async def slow(_: PromptContext) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def failing(_: PromptContext) -> str:
        await asyncio.sleep(0)
        raise ValueError("nope")

    prompt.context("slow", 0, slow)
    prompt.section("failing", 0, failing)
    with pytest.raises(PromptError, match="failing"):
        await asyncio.wait_for(prompt.assemble(pc()), 2)
    assert cancelled.is_set()


async def test_a_plain_renderer_needs_no_task_and_one_failing_leaves_nothing_unawaited() -> None:
    """A renderer that answers at once is not made a task; one that raises before the
    awaitable ones start stops the assembly, and theirs are closed, not left to warn
    that they were never awaited (the warning is an error here)."""
    _, prompt = prompt_root()
    tasks_at_plain: list[int] = []

    def plain(_: PromptContext) -> str:
        tasks_at_plain.append(len(asyncio.all_tasks()))
        return "plain"

    async def later(_: PromptContext) -> str:
        await asyncio.sleep(0)
        return "later"

    prompt.context("plain", 1, plain)
    prompt.context("later", 0, later)
    before = len(asyncio.all_tasks())
    assembly = await prompt.assemble(pc())
    assert [text for _, _, text in assembly.context] == ["later", "plain"]
    assert tasks_at_plain == [before]  # run in the assembling task, before any other

    def broken(_: PromptContext) -> str:
        raise RuntimeError("boom")

    prompt.context("broken", 2, broken)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PromptError, match="context entry 'broken' failed"):
            await prompt.assemble(pc())
        gc.collect()


async def test_variable_names_are_checked() -> None:
    _, prompt = prompt_root()
    with pytest.raises(ValueError, match="must match"):
        prompt.variable("not a name", lambda _: "")


async def test_agent_sections_shadow_globals_for_that_agent_only() -> None:
    root, prompt = prompt_root()
    prompt.section("persona", 0, "Global persona.")
    prompt.section("tools", 100, "Tool guidance.")
    agent, other = object(), object()
    agent_ctx = root.child(agent, name="agent")
    agent_prompt = agent_ctx.get(PROMPT)
    agent_prompt.section("persona", 0, "Subagent persona.")
    agent_prompt.section("report", 200, "Report back in {{format}}.")
    agent_prompt.variable("format", lambda _: "one paragraph")

    assert (await prompt.assemble(pc(agent))).system == (
        "Subagent persona.\n\nTool guidance.\n\nReport back in one paragraph."
    )
    assert (await prompt.assemble(pc(other))).system == "Global persona.\n\nTool guidance."
    assert (await prompt.assemble(pc())).system == "Global persona.\n\nTool guidance."
    assert set(agent_prompt.visible_sections()) == {"persona", "tools", "report"}

    await agent_ctx.dispose()
    assert (await prompt.assemble(pc(agent))).system == "Global persona.\n\nTool guidance."


async def test_registrations_go_with_their_plugin_context() -> None:
    root, _ = prompt_root()
    plugin = root.child(name="plugin")
    plugin.get(PROMPT).section("extra", 0, "Extra.")
    plugin.get(PROMPT).context("clock", 0, lambda _: "noon")
    assert (await root.get(PROMPT).assemble(pc())).system == "Extra."
    await plugin.dispose()
    assembly = await root.get(PROMPT).assemble(pc())
    assert assembly.system == ""
    assert assembly.context == ()


async def test_a_disposer_removes_one_registration() -> None:
    _, prompt = prompt_root()
    dispose = prompt.section("a", 0, "A")
    prompt.section("b", 1, "B")
    await undo(dispose)
    assert (await prompt.assemble(pc())).system == "B"


async def test_a_name_is_registered_once_per_scope() -> None:
    root, prompt = prompt_root()
    prompt.section("persona", 0, "A")
    with pytest.raises(RegistrationConflictError, match="prompt section 'persona'"):
        root.child().get(PROMPT).section("persona", 1, "B")


async def test_tools_are_sorted_by_name() -> None:
    seen: list[object | None] = []

    def tools(scope: object | None) -> list[ToolSchema]:
        seen.append(scope)
        return [tool("write"), tool("bash"), tool("read")]

    _, prompt = prompt_root(tools)
    agent = object()
    assembly = await prompt.assemble(pc(agent))
    assert [t.name for t in assembly.tools] == ["bash", "read", "write"]
    assert seen == [agent]


async def test_tool_order_puts_listed_tools_first() -> None:
    def tools(_: object | None) -> list[ToolSchema]:
        return [tool("write"), tool("grep"), tool("bash"), tool("read"), tool("edit")]

    _, prompt = prompt_root(tools, tool_order=["read", "missing", "edit"])
    assembly = await prompt.assemble(pc())
    assert [t.name for t in assembly.tools] == ["read", "edit", "bash", "grep", "write"]


async def test_context_entries_render_in_order_with_their_form() -> None:
    _, prompt = prompt_root()

    async def git(_: PromptContext) -> str:
        return "branch main"

    prompt.context("git", 50, git)
    prompt.context("instructions", 10, lambda _: "Follow AGENTS.md", form="instructions")
    prompt.context("absent", 20, lambda _: None)
    prompt.context("blank", 30, lambda _: " ")
    prompt.context("b-same-order", 50, lambda _: "{{not interpolated}}")

    assembly = await prompt.assemble(pc())
    assert assembly.context == (
        ("instructions", "instructions", "Follow AGENTS.md"),
        ("b-same-order", "snapshot", "{{not interpolated}}"),
        ("git", "snapshot", "branch main"),
    )
    assert assembly.system == ""


async def test_agent_context_entries_shadow_globals() -> None:
    root, prompt = prompt_root()
    prompt.context("env", 0, lambda _: "global")
    agent = object()
    root.child(agent).get(PROMPT).context("env", 0, lambda _: "agent")
    assert (await prompt.assemble(pc(agent))).context == (("env", "snapshot", "agent"),)
    assert (await prompt.assemble(pc())).context == (("env", "snapshot", "global"),)


async def test_the_waterfall_rewrites_the_assembly() -> None:
    root, prompt = prompt_root(lambda _: [tool("bash"), tool("read")])
    prompt.section("persona", 0, "Persona.")
    seen: list[PromptContext] = []

    async def drop_bash(draft: AssemblyDraft, next_: Next[AssemblyDraft, Assembly]) -> Assembly:
        seen.append(draft.context)
        tools = tuple(t for t in draft.assembly.tools if t.name != "bash")
        assembly = dataclasses.replace(draft.assembly, tools=tools)
        return await next_(dataclasses.replace(draft, assembly=assembly))

    def shout(
        draft: AssemblyDraft, next_: Callable[..., Awaitable[Assembly]]
    ) -> Awaitable[Assembly]:
        assembly = draft.assembly
        return next_(
            dataclasses.replace(
                draft, assembly=dataclasses.replace(assembly, system=assembly.system.upper())
            )
        )

    plugin = root.child(name="rewriter")
    plugin.on(SYSTEM_PROMPT_ASSEMBLE, drop_bash)
    plugin.on(SYSTEM_PROMPT_ASSEMBLE, shout)
    request = pc()
    assembly = await prompt.assemble(request)
    assert assembly.system == "PERSONA."
    assert [t.name for t in assembly.tools] == ["read"]
    assert seen == [request]

    await plugin.dispose()
    assert (await prompt.assemble(request)).system == "Persona."


async def test_agent_scoped_waterfall_listeners_see_only_their_agent() -> None:
    root, prompt = prompt_root()
    prompt.section("persona", 0, "Persona.")
    agent = object()

    def mark(draft: AssemblyDraft, next_: Any) -> Assembly:
        return dataclasses.replace(draft.assembly, system=draft.assembly.system + " (agent)")

    root.child(agent).on(SYSTEM_PROMPT_ASSEMBLE, mark)
    assert (await prompt.assemble(pc(agent))).system == "Persona. (agent)"
    assert (await prompt.assemble(pc())).system == "Persona."


async def test_a_waterfall_returning_something_else_is_refused() -> None:
    root, prompt = prompt_root()
    root.on(SYSTEM_PROMPT_ASSEMBLE, lambda draft, next_: "not an assembly")
    with pytest.raises(TypeError, match="not an Assembly"):
        await prompt.assemble(pc())


class Scope:
    """An agent stand-in: weakly referenceable, as agents are."""


async def test_per_workspace_reads_again_only_when_the_workspace_may_have_changed() -> None:
    reads: list[PromptContext] = []

    async def read_files(context: PromptContext) -> str:
        reads.append(context)
        return f"read {len(reads)}"

    entry = per_workspace(read_files)
    one, two = Scope(), Scope()
    assert await entry(pc(one, workspace=(1, 0))) == "read 1"
    assert await entry(pc(one, workspace=(1, 0))) == "read 1"  # reused
    assert await entry(pc(two, workspace=(1, 0))) == "read 2"  # each agent its own
    assert await entry(pc(one, workspace=(1, 1))) == "read 3"  # a tool had effects
    assert await entry(pc(one, workspace=(1, 1), cwd=Path("/elsewhere"))) == "read 4"
    # Without a workspace value or a scope, or for a scope that cannot be weakly
    # referenced, nothing is reused.
    assert await entry(pc(one)) == "read 5"
    assert await entry(pc(one)) == "read 6"
    assert await entry(pc(None, workspace=(1, 0))) == "read 7"
    assert await entry(pc(None, workspace=(1, 0))) == "read 8"
    assert await entry(pc(object(), workspace=(1, 0))) == "read 9"


async def test_per_workspace_keeps_nothing_from_a_failure_and_forgets_gone_agents() -> None:
    outcomes: list[str | Exception] = [OSError("busy"), "fine"]
    calls = 0

    def read_files(context: PromptContext) -> str:
        nonlocal calls
        calls += 1
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    entry = per_workspace(read_files)
    scope = Scope()
    with pytest.raises(OSError, match="busy"):
        await entry(pc(scope, workspace=(1, 0)))
    assert await entry(pc(scope, workspace=(1, 0))) == "fine"
    assert await entry(pc(scope, workspace=(1, 0))) == "fine"
    assert calls == 2
    seen = weakref.ref(scope)
    del scope
    gc.collect()
    assert seen() is None  # the cache held no strong reference to the agent


async def test_plan_mode_is_said_last_and_only_while_it_is_the_mode(tmp_path: Path) -> None:
    from dsh.permission_modes import PLAN_MODE_TEXT, PermissionMode
    from dsh.prompt import PromptContext, PromptService, register_core_sections

    mode: list[PermissionMode] = ["default"]
    root = Context(name="root")
    service = PromptService(root, tools=lambda scope: [])
    view = service.bind_context(root)
    register_core_sections(view, mode=lambda: mode[0])
    view.section("persona", 0, "You answer briefly.")
    pc = PromptContext(agent=None, scope=None, cwd=tmp_path, provider="p", model="m")

    default = (await view.assemble(pc)).system
    assert "plan mode" not in default
    assert (await view.assemble(pc)).system == default  # byte-stable while the mode is
    mode[0] = "plan"
    planning = (await view.assemble(pc)).system
    assert planning.endswith(PLAN_MODE_TEXT)
    assert planning.startswith(default)  # the cached prefix is the same
    mode[0] = "accept-edits"
    assert (await view.assemble(pc)).system == default
