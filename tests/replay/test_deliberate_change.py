"""A change to what the model is sent makes the replay of a recorded session fail, with
a diff that names it: a system prompt section added, a tool's schema changed. Both
changes come from a plugin loaded into the replaying runtime, as a code change would
make them."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

from dsh.hooks import SYSTEM_PROMPT_ASSEMBLE
from dsh.kernel import Candidate, Context, Plugin
from dsh.llm import ToolSchema
from dsh.prompt import Assembly, AssemblyDraft
from dsh.services import PROMPT
from dsh.testing.replay import replay_file_report
from tests.replay.test_recorded_sessions import FOLDER, SUBSTITUTIONS

SESSION = FOLDER / "tool-loops.json"


def _section(ctx: Context, config: object) -> None:
    ctx.get(PROMPT).section("replay-change", 500, "Always answer in French.")


async def _changed_read(draft: AssemblyDraft, next: Callable[..., Awaitable[Assembly]]) -> Assembly:
    assembly = await next()
    tools = tuple(
        ToolSchema(name=t.name, description=t.description + " Reads fast.", parameters=t.parameters)
        if t.name == "read"
        else t
        for t in assembly.tools
    )
    return dataclasses.replace(assembly, tools=tools)


def _schema(ctx: Context, config: object) -> None:
    ctx.on(SYSTEM_PROMPT_ASSEMBLE, _changed_read)


async def _report(name: str, plugin: Plugin, path: Path = SESSION) -> str:
    report = await replay_file_report(
        path, substitutions=SUBSTITUTIONS, plugins=[Candidate(name, "tests", plugin)]
    )
    assert not report.identical
    first = report.first
    assert first is not None
    assert first.where.startswith("request 1 (turn 1, step 1)")
    return first.describe()


async def test_a_system_prompt_section_added_is_named_with_its_line() -> None:
    said = await _report("section", Plugin(name="replay-section", inject=(PROMPT,), apply=_section))
    assert "system prompt line" in said
    assert "now:      Always answer in French." in said


async def test_a_tool_schema_changed_is_named_by_tool_and_field() -> None:
    said = await _report("schema", Plugin(name="replay-schema", apply=_schema))
    assert said.startswith("request 1 (turn 1, step 1): tool read: description")
    assert "Reads fast." in said


async def test_without_the_change_the_same_session_is_identical() -> None:
    report = await replay_file_report(SESSION, substitutions=SUBSTITUTIONS)
    assert report.identical, report.text()
