"""Skills: front matter, discovery across the project and user roots, the catalog the
model is offered, and the ``skill`` tool called by a scripted model."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.commands import CommandContext
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.services import COMMANDS, TOOLS
from dsh.session import ToolResult, check_log
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ToolContext, ToolDefinition
from dsh_plugins._shared.frontmatter import FrontMatterError, split_front_matter
from dsh_plugins.skills import NONE_LEFT
from dsh_plugins.skills.index import SkillIndex, skill_roots
from dsh_plugins.skills.render import catalog
from tests.support.command_host import RecordingHost

PDF_BODY = "# Filling PDF forms\n\nRun `scripts/fill.py FORM DATA`; check every field."


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill_file(name: str | None, description: str | None, body: str, **extra: str) -> str:
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    if description is not None:
        lines.append(f"description: {description}")
    lines.extend(f"{key}: {value}" for key, value in extra.items())
    return "\n".join([*lines, "---", "", body, ""])


@dataclass
class Roots:
    home: Path
    project: Path

    @property
    def user_skills(self) -> Path:
        return self.home / "skills"

    @property
    def project_skills(self) -> Path:
        return self.project / ".dsh" / "skills"


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Roots:
    """A user home and a git project with skills: one overridden by the project, one
    with broken front matter, one only the user may invoke, one single-file skill."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    monkeypatch.setenv("DSH_HOME", str(home))
    found = Roots(home, project)
    write(
        found.user_skills / "pdf-forms" / "SKILL.md",
        skill_file("pdf-forms", "The user's old PDF skill.", "OLD BODY"),
    )
    write(
        found.user_skills / "deploy" / "SKILL.md",
        skill_file(
            None,
            '"Deploy the app <to staging> & production."',
            "DEPLOY BODY",
            when_to_use="when the user asks to ship",
        ),
    )
    write(
        found.project_skills / "pdf-forms" / "SKILL.md",
        skill_file("pdf-forms", "Fill in PDF forms with the project's script.", PDF_BODY),
    )
    write(found.project_skills / "pdf-forms" / "scripts" / "fill.py", "print('filled')\n")
    write(found.project_skills / "broken" / "SKILL.md", "---\nname: broken\ndescription: x\n")
    write(
        found.project_skills / "secret-recipe" / "SKILL.md",
        skill_file(
            "secret-recipe",
            "Only for the user.",
            "SECRET BODY",
            **{"disable-model-invocation": "true"},
        ),
    )
    write(
        found.project / ".agents" / "skills" / "notes.md",
        skill_file(None, "Take meeting notes.", "NOTES BODY"),
    )
    return found


# ---------------------------------------------------------------------- front matter


def test_front_matter_reads_the_yaml_subset_skills_use() -> None:
    text = (
        "\ufeff---\n"
        "# a comment\n"
        "name: my-skill   # trailing comment\n"
        "description: >\n"
        "  Folded over\n"
        "  two lines.\n"
        "when_to_use: 'it''s time'\n"
        'Disable-Model-Invocation: "yes"\n'
        "metadata:\n"
        "  owner: someone\n"
        "allowed-tools:\n"
        "  - bash\n"
        "literal: |\n"
        "  keep\n"
        "    this\n"
        "plain: continued\n"
        "  on the next line\n"
        "---\n"
        "Body #1\n"
    )
    fields, body = split_front_matter(text)
    assert fields["name"] == "my-skill"
    assert fields["description"] == "Folded over two lines."
    assert fields["when-to-use"] == "it's time"
    assert fields["disable-model-invocation"] == "yes"
    assert fields["literal"] == "keep\n  this"
    assert fields["plain"] == "continued on the next line"
    assert body == "Body #1"
    assert split_front_matter("no header\n---\n") == ({}, "no header\n---\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nname: x\n", "no closing"),
        ("---\njust words\n---\n", "line 2: expected 'key: value'"),
        ('---\ndescription: "open\n---\n', "line 2: a double-quoted value is not closed"),
        ("---\nname: x\n  indented: y\n  - z\n---\n", None),  # folded, not an error
        ("---\n  name: x\n---\n", "line 2: unexpected indentation"),
    ],
)
def test_front_matter_errors_name_the_line(text: str, message: str | None) -> None:
    if message is None:
        split_front_matter(text)
        return
    with pytest.raises(FrontMatterError, match=message):
        split_front_matter(text)


# ---------------------------------------------------------------------- discovery


def test_the_project_wins_and_broken_skills_are_left_out_once(
    roots: Roots, caplog: pytest.LogCaptureFixture
) -> None:
    index = SkillIndex(home=roots.home)
    nested = roots.project / "src" / "deep"
    nested.mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="dsh.plugins.skills"):
        scan = index.scan(nested)
        again = index.scan(nested)
    assert list(scan.skills) == ["deploy", "notes", "pdf-forms", "secret-recipe"]
    pdf = scan.skills["pdf-forms"]
    assert pdf.description == "Fill in PDF forms with the project's script."
    assert pdf.base_dir == roots.project_skills / "pdf-forms"
    assert pdf.body == PDF_BODY
    assert scan.skills["notes"].base_dir == roots.project / ".agents" / "skills"
    assert scan.skills["deploy"].when_to_use == "when the user asks to ship"
    assert not scan.skills["secret-recipe"].model_invocable
    assert [s.name for s in scan.model_skills()] == ["deploy", "notes", "pdf-forms"]
    [problem] = scan.problems
    assert problem.path == roots.project_skills / "broken" / "SKILL.md"
    assert "no closing" in problem.reason
    assert again == scan
    assert caplog.text.count("left out") == 1  # reported once, not at every step
    assert skill_roots(nested, roots.home)[0] == roots.project_skills


def test_bad_names_and_missing_descriptions_are_problems(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / "skills" / "Bad_Name" / "SKILL.md", skill_file(None, "A skill.", "x"))
    write(home / "skills" / "quiet" / "SKILL.md", "Just a body, no front matter.\n")
    write(home / "skills" / "README.md", "# About these skills\n")
    write(home / "skills" / "folder-without-skill" / "notes.txt", "")
    scan = SkillIndex(home=home).scan(tmp_path)
    assert scan.skills == {}
    reasons = sorted(problem.reason for problem in scan.problems)
    assert reasons == [
        "'Bad_Name' is not a valid skill name (kebab-case, at most 64 characters)",
        "its front matter has no description",
    ]


def test_an_edited_skill_is_read_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write(home / "skills" / "tidy" / "SKILL.md", skill_file(None, "Tidy up.", "v1"))
    index = SkillIndex(home=home)
    assert index.scan(tmp_path).skills["tidy"].body == "v1"
    write(path, skill_file(None, "Tidy up, better.", "version two"))
    assert index.scan(tmp_path).skills["tidy"].body == "version two"


def test_the_catalog_escapes_and_bounds_descriptions(roots: Roots) -> None:
    scan = SkillIndex(home=roots.home).scan(roots.project)
    text = catalog(scan.model_skills())
    assert text is not None
    assert "<name>deploy</name>" in text
    assert (
        "<description>Deploy the app &lt;to staging&gt; &amp; production. When to use: "
        "when the user asks to ship</description>"
    ) in text
    assert "secret-recipe" not in text
    assert "BODY" not in text
    assert str(roots.project) not in text
    long = SkillIndex(home=roots.home).scan(roots.project).skills["notes"]
    wordy = catalog([replace(long, description="word " * 200)])
    assert wordy is not None
    description = wordy.split("<description>")[1].split("</description>")[0]
    assert len(description) == 500
    assert catalog([]) is None


# ---------------------------------------------------------------------- a real runtime


class NewSkill(BaseModel):
    name: str


@pytest.fixture
async def runtime(
    roots: Roots, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    started = await start_runtime(
        home=roots.home,
        cwd=roots.project,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}},
        permission_mode="bypass",  # add_skill writes; nobody is here to approve it
    )

    async def add_skill(arguments: NewSkill, context: ToolContext) -> str:
        write(
            roots.project_skills / arguments.name / "SKILL.md",
            skill_file(arguments.name, "Made mid-turn.", "FRESH BODY"),
        )
        return "added"

    started.root.get(TOOLS).register(
        "add_skill",
        ToolDefinition(
            name="add_skill",
            description="Add a skill.",
            arguments=NewSkill,
            execute=add_skill,
            read_only=False,  # it writes: the catalog is scanned again after it
        ),
    )
    yield started
    await started.aclose()


def catalogs(body: dict[str, Any]) -> list[str]:
    return [
        m["content"]
        for m in body["messages"]
        if m["role"] == "user" and "<available_skills>" in m["content"]
    ]


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_a_scripted_model_loads_skills_through_the_tool(
    runtime: Runtime, fake_llm: FakeLLM, roots: Roots
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="skill", arguments={"name": "pdf-forms"})]))
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="skill", arguments={"name": "nope"}),
                ToolCallSpec(name="skill", arguments={"name": "Not A Name"}),
                ToolCallSpec(name="skill", arguments={"name": "secret-recipe"}),
            ]
        )
    )
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="add_skill", arguments={"name": "fresh"})]))
    fake_llm.add(Reply(text="All done."))
    agent = await runtime.agents.create(roots.project)
    agent.followup(user_text("fill in form.pdf"))
    await asyncio.wait_for(agent.when_idle(), 10)

    first, second, third, fourth = (r.body for r in fake_llm.chat_requests)
    # The catalog: names and descriptions of what the model may load, nothing more.
    [offered] = catalogs(first)
    assert "<name>pdf-forms</name>" in offered
    assert "Fill in PDF forms with the project's script." in offered
    assert "<name>deploy</name>" in offered
    assert "<name>notes</name>" in offered
    assert "secret-recipe" not in offered
    assert "broken" not in offered
    assert "BODY" not in offered
    assert "skill" in [tool["function"]["name"] for tool in first["tools"]]

    [loaded] = tool_outputs(second)
    assert loaded.startswith('<skill_content name="pdf-forms">')
    assert f"Base directory: {roots.project_skills / 'pdf-forms'}" in loaded
    assert f"<skill_instructions>\n{PDF_BODY}\n</skill_instructions>" in loaded
    assert "OLD BODY" not in loaded  # the project's skill, not the user's

    errors = tool_outputs(third)[1:]
    assert errors[0] == (
        "Error: There is no skill named 'nope'. Available skills: deploy, notes, pdf-forms."
    )
    assert errors[1].startswith("Error: 'Not A Name' is not a skill name")
    assert errors[2].startswith("Error: The skill 'secret-recipe' is for the user to invoke")
    codes = [
        e.data.error.code
        for e in agent.session.events
        if isinstance(e.data, ToolResult) and e.data.error is not None
    ]
    assert codes == ["SKILL_NOT_FOUND", "SKILL_INVALID_NAME", "SKILL_NOT_MODEL_INVOCABLE"]

    # A skill added between steps is offered at the next one; earlier catalogs stay.
    assert catalogs(third) == [offered]
    *earlier, latest = catalogs(fourth)
    assert earlier == [offered]
    assert "<name>fresh</name>" in latest
    assert "<name>pdf-forms</name>" in latest
    assert check_log(agent.session.events) == []


async def test_skills_commands_list_and_hand_over_skills(
    runtime: Runtime, fake_llm: FakeLLM, roots: Roots
) -> None:
    agent = await runtime.agents.create(roots.project)
    host = RecordingHost()
    context = CommandContext(agent, runtime.root, host)
    assert await runtime.root.get(COMMANDS).run("/skills", context)
    [listing] = host.texts
    assert "secret-recipe [user only]: Only for the user." in listing
    assert "pdf-forms: Fill in PDF forms" in listing
    assert "Left out:" in listing
    assert "broken" in listing

    fake_llm.add(Reply(text="Filled."))
    assert await runtime.root.get(COMMANDS).run("/skill secret-recipe make dinner", context)
    await asyncio.wait_for(agent.when_idle(), 10)
    [request] = fake_llm.chat_requests
    last = request.body["messages"][-1]["content"]
    assert last.startswith('<skill_content name="secret-recipe">')
    assert last.endswith("SECRET BODY\n</skill_instructions>\n</skill_content>\n\nmake dinner")

    host.shown.clear()
    assert await runtime.root.get(COMMANDS).run("/skill missing", context)
    # A recorded command's failure is in its command/done (the UIs show it from there).
    [done] = [e.data for e in agent.session.events if e.type == "command/done"][-1:]
    assert (done.kind, done.text) == (
        "error",
        "no skill named 'missing' (found: deploy, notes, pdf-forms, secret-recipe)",
    )
    assert host.texts == []


async def test_when_the_last_skill_goes_the_model_is_told(
    runtime: Runtime, fake_llm: FakeLLM, roots: Roots
) -> None:
    fake_llm.add(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    agent = await runtime.agents.create(roots.project)
    agent.followup(user_text("first"))
    await asyncio.wait_for(agent.when_idle(), 10)
    shutil.rmtree(roots.user_skills)
    shutil.rmtree(roots.project / ".dsh")
    shutil.rmtree(roots.project / ".agents")
    for text in ("second", "third"):
        agent.followup(user_text(text))
        await asyncio.wait_for(agent.when_idle(), 10)
    first, second, third = (r.body for r in fake_llm.chat_requests)
    assert len(catalogs(first)) == 1
    assert [m["content"] for m in second["messages"][-2:]] == [NONE_LEFT, "second"]
    assert third["messages"][-1]["content"] == "third"
    assert third["messages"][-2]["role"] == "assistant"  # said once, not at every step
