"""The ``skill`` tool: the model loads a skill's full instructions by name.

Read-only and never asked about: it reads files the user or the project put in a
skills folder for the model to read.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from dsh.tools import ClaudeCodeName, TextView, ToolContext, ToolDefinition, ToolError
from dsh_plugins.skills.index import MAX_NAME, SkillIndex, valid_name
from dsh_plugins.skills.render import skill_content

DESCRIPTION = (
    "Load a skill: the full instructions for a kind of task. The skills you may load "
    "are listed by name and description in <available_skills>; when a task matches "
    "one, load it before starting and follow what it says. Relative paths in a "
    "skill's instructions are relative to the base directory it gives."
)


class SkillArguments(BaseModel):
    name: str = Field(description="the skill's name, exactly as <available_skills> lists it")


def skill_tool(index: SkillIndex) -> ToolDefinition:
    async def execute(arguments: SkillArguments, context: ToolContext) -> str:
        name = arguments.name.strip()
        if not valid_name(name):
            raise ToolError(
                f"{name!r} is not a skill name: names are kebab-case (like pdf-forms), "
                f"at most {MAX_NAME} characters.",
                "SKILL_INVALID_NAME",
            )
        scan = await asyncio.to_thread(index.scan, context.cwd)
        skill = scan.skills.get(name)
        if skill is None:
            names = ", ".join(s.name for s in scan.model_skills())
            listed = f"Available skills: {names}." if names else "No skills are available."
            raise ToolError(f"There is no skill named {name!r}. {listed}", "SKILL_NOT_FOUND")
        if not skill.model_invocable:
            raise ToolError(
                f"The skill {name!r} is for the user to invoke; it cannot be loaded by a tool "
                "call.",
                "SKILL_NOT_MODEL_INVOCABLE",
            )
        return skill_content(skill)

    def present(arguments: dict[str, Any]) -> TextView:
        return TextView(title=f"Skill {arguments.get('name', '')}".strip())

    return ToolDefinition(
        name="skill",
        description=DESCRIPTION,
        arguments=SkillArguments,
        execute=execute,
        read_only=True,
        kind="read",
        present_call=present,
        present_result=lambda arguments, result: present(arguments),
        claude_code=ClaudeCodeName("Skill"),
    )
