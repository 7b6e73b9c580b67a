"""What the model reads: the catalog of skills, and a loaded skill.

The catalog names each skill the model may load and says when to use it, and no more:
the bodies stay out of the context until a ``skill`` call asks for one, and paths stay
out because the model needs only the name to ask.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_plugins.skills.index import Skill

MAX_DESCRIPTION = 500

CATALOG_PREAMBLE = (
    "Skills are instructions for particular kinds of task, kept out of this context "
    "until needed. When a task matches a skill's description, load that skill with "
    "the skill tool (by its name) before you start, and follow its instructions."
)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summary(skill: Skill) -> str:
    """The description, with when to use the skill, within the catalog's limit."""
    text = skill.description
    if skill.when_to_use:
        text = f"{text} When to use: {skill.when_to_use}"
    return _shorten(text, MAX_DESCRIPTION)


def catalog(skills: Sequence[Skill]) -> str | None:
    """The ``<available_skills>`` reminder; None when there is no skill to offer."""
    if not skills:
        return None
    # xml.sax imports urllib.request and http.client: none of it at start-up
    from xml.sax.saxutils import escape

    items = "\n".join(
        f"<skill>\n<name>{escape(skill.name)}</name>\n"
        f"<description>{escape(summary(skill))}</description>\n</skill>"
        for skill in skills
    )
    return (
        f"<system-reminder>\n{CATALOG_PREAMBLE}\n"
        f"<available_skills>\n{items}\n</available_skills>\n</system-reminder>"
    )


def skill_content(skill: Skill) -> str:
    """A loaded skill: where its files are, then its instructions."""
    from xml.sax.saxutils import quoteattr

    return (
        f"<skill_content name={quoteattr(skill.name)}>\n"
        "<skill_resources>\n"
        f"Base directory: {skill.base_dir}\n"
        "Relative paths in the instructions below are relative to it.\n"
        "</skill_resources>\n"
        f"<skill_instructions>\n{skill.body}\n</skill_instructions>\n"
        "</skill_content>"
    )
