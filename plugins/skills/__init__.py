"""Skills: folders of instructions (a ``SKILL.md`` with a name and a description in its
front matter) that the model loads when a task calls for them.

The model sees a catalog of the skills' names and descriptions, as a context entry
rescanned at each turn and after each step that ran a tool with effects (so a skill
written mid-turn shows up at the next step, and the loop enters the catalog again only
when it changed), and loads a skill's full
instructions with the ``skill`` tool. ``/skills`` lists what was found and what was
left out; ``/skill NAME [request]`` hands a skill to the model as the person's own
prompt. Where skills are found is in :mod:`dsh_plugins.skills.index`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel, Field

from dsh.agent import AgentHandle
from dsh.commands import Command, CommandContext, CommandError
from dsh.kernel import Context, Plugin
from dsh.llm import user_text
from dsh.paths import dsh_home
from dsh.prompt import PromptContext, per_workspace
from dsh.services import COMMANDS, PROMPT, TOOLS
from dsh_plugins.skills.index import Scan, Skill, SkillIndex, skill_roots
from dsh_plugins.skills.render import catalog, skill_content, summary
from dsh_plugins.skills.tool import skill_tool

__all__ = ["ENTRY", "NONE_LEFT", "Config", "SkillIndex", "plugin"]

ENTRY = "skills"
"""The context entry's name, and the plugin name its messages carry."""
NONE_LEFT = "<system-reminder>\nNo skills are available any more.\n</system-reminder>"


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    dirs: list[Path] = Field(default_factory=list)
    """More folders of skills, after the project's and before ``$DSH_HOME/skills``;
    relative ones are relative to the project root."""
    agents_dirs: bool = True
    """Also read ``<project>/.agents/skills``, the folder other agents use."""


def _offered_before(agent: AgentHandle | None) -> bool:
    """Whether this session's history holds a catalog (entered by an earlier step)."""
    return agent is not None and ENTRY in agent.entered_context()


def _listing(scan: Scan, roots: list[Path]) -> str:
    lines: list[str] = []
    for skill in scan.skills.values():
        flags = [
            flag
            for flag, on in (
                ("user only", not skill.model_invocable),
                ("model only", not skill.user_invocable),
            )
            if on
        ]
        extra = f" [{', '.join(flags)}]" if flags else ""
        lines.append(f"{skill.name}{extra}: {summary(skill)}\n    {skill.path}")
    if not lines:
        lines.append("No skills found. Looked in: " + ", ".join(str(root) for root in roots))
    if scan.problems:
        lines.append("Left out:")
        lines.extend(f"  {problem.path}: {problem.reason}" for problem in scan.problems)
    return "\n".join(lines)


def commands(index: SkillIndex) -> list[Command]:
    async def list_skills(context: CommandContext, args: str) -> None:
        cwd = context.agent.cwd
        scan = await asyncio.to_thread(index.scan, cwd)
        roots = skill_roots(cwd, index.home, index.extra, index.agents_dirs)
        context.host.show(_listing(scan, roots))

    async def use_skill(context: CommandContext, args: str) -> None:
        name, _, request = args.strip().partition(" ")
        if not name:
            raise CommandError("name a skill: /skill NAME [what to do]")
        scan = await asyncio.to_thread(index.scan, context.agent.cwd)
        skill: Skill | None = scan.skills.get(name)
        if skill is None:
            known = ", ".join(scan.skills) or "none"
            raise CommandError(f"no skill named {name!r} (found: {known})")
        if not skill.user_invocable:
            raise CommandError(f"the skill {name!r} is only for the model to load")
        text = skill_content(skill)
        if request.strip():
            text = f"{text}\n\n{request.strip()}"
        context.agent.followup(user_text(text))

    return [
        Command(
            name="skills", description="List the skills found, and any left out", run=list_skills
        ),
        Command(
            name="skill",
            description="Hand a skill's instructions to the model, with a request",
            run=use_skill,
            arguments="NAME [request]",
        ),
    ]


def apply(ctx: Context, config: Config) -> None:
    index = SkillIndex(home=dsh_home(), extra=tuple(config.dirs), agents_dirs=config.agents_dirs)

    async def scan_catalog(pc: PromptContext) -> str | None:
        scan = await asyncio.to_thread(index.scan, pc.cwd)
        return catalog(scan.model_skills())

    # Scanned again only when the files may have changed: each turn, and each step
    # after a tool with effects (which may have written a skill).
    scanned = per_workspace(scan_catalog)

    async def available_skills(pc: PromptContext) -> str | None:
        text = await scanned(pc)
        if text is None and _offered_before(pc.agent):
            return NONE_LEFT  # the last skill went: say so, or the old catalog stands
        return text

    ctx.get(PROMPT).context(ENTRY, 20, available_skills, form="catalog")
    ctx.get(TOOLS).register("skill", skill_tool(index))
    for command in commands(index):
        ctx.get(COMMANDS).register(command.name, command)


plugin = Plugin(
    name="skills",
    description="skills from .dsh/skills and $DSH_HOME/skills: a catalog, the skill tool",
    inject=(PROMPT, TOOLS, COMMANDS),
    config=Config,
    apply=apply,
)
