"""The workspace trust question in plain mode: ``run_plain`` starting its own runtime
in a cloned project whose ``.dsh/settings.toml`` asks for ``bypass``, answered
through a pipe; and a script on stdin, which nobody is there to ask."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input

from dsh.testing import FakeLLM
from dsh.trust import TrustStore
from tests.support.plain_script import run_plain_script
from tests.support.waits import HANG_S
from tests.ui.plain_support import Plain

TIMEOUT = HANG_S
"""Any one wait: start-up loads the runtime and the plugins, slow on a loaded box."""
ROOT = Path(__file__).resolve().parents[2]
QUESTION = "would change what dsh does:"


@pytest.fixture
def home(tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir(mode=0o700)
    (folder / "settings.toml").write_text(
        f'[plugins.llm-deepseek]\nbase_url = "{fake_llm.base_url}"\n'
        "[plugins.title]\ngenerate = false\n"
    )
    monkeypatch.setenv("DSH_HOME", str(folder))
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.delenv("NO_COLOR", raising=False)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A cloned repository (its own ``.git``: the trust root), files 0644."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / ".dsh").mkdir()
    settings = folder / ".dsh" / "settings.toml"
    settings.write_text('[permissions]\nmode = "bypass"\n')
    settings.chmod(0o644)
    return folder.resolve()


def recorded(home: Path) -> dict[str, bool]:
    """The trust store's decisions, folder -> trusted."""
    return {str(d.root): d.trusted for d in TrustStore(home).decisions()}


async def test_the_question_names_each_key_and_trust_applies_it(
    home: Path, project: Path, pipe: PipeInput
) -> None:
    plain = Plain(None, pipe, project, timeout=TIMEOUT)
    text = await plain.wait_for("only settings that make dsh do less apply")
    assert f"? {project}/.dsh/settings.toml {QUESTION}" in text
    assert '  permissions.mode = "bypass"\n' in text
    assert "    would widen the permission mode from default to bypass\n" in text
    assert f"Until you trust {project}," in text
    plain.type("x\r")  # not an answer: asked again
    await plain.wait_for("Please answer t, n or l.")
    plain.type("t\r")
    assert await plain.mode() == "bypass"
    assert await plain.quit() == 0
    assert recorded(home) == {str(project): True}
    assert "ignored" not in plain.text


async def test_n_records_dont_trust(home: Path, project: Path, pipe: PipeInput) -> None:
    plain = Plain(None, pipe, project, timeout=TIMEOUT)
    await plain.wait_for(QUESTION)
    plain.type("n\r")
    await plain.wait_for('ignored permissions.mode = "bypass"')
    assert await plain.mode() == "default"
    assert await plain.quit() == 0
    assert recorded(home) == {str(project): False}


async def test_the_end_of_input_decides_later(home: Path, project: Path, pipe: PipeInput) -> None:
    plain = Plain(None, pipe, project, timeout=TIMEOUT)
    await plain.wait_for(QUESTION)
    plain.type("\x04")  # Ctrl+D at the question
    await plain.wait_for('ignored permissions.mode = "bypass"')
    assert await plain.mode() == "default"
    assert await plain.quit() == 0
    assert recorded(home) == {}
    # Decided later: the next start asks again.
    with create_pipe_input() as again:
        second = Plain(None, again, project, timeout=TIMEOUT)
        await second.wait_for(QUESTION)
        again.close()  # the input ends: later, then plain mode ends too
        assert await asyncio.wait_for(second.task, TIMEOUT) == 0
    assert recorded(home) == {}


async def test_a_script_on_stdin_is_not_asked(home: Path, project: Path, fake_llm: FakeLLM) -> None:
    code, text, err = await run_plain_script(project, b"/permissions\n", {})
    assert code == 0, err
    assert QUESTION not in text
    assert "Trust this folder" not in text
    assert (
        f'ignored permissions.mode = "bypass" (would widen the permission mode from default '
        f"to bypass) from {project}/.dsh/settings.toml; {project} is not trusted "
        "(`dsh trust` or --trust applies it)"
    ) in text
    assert "Permission mode: default" in text
    assert recorded(home) == {}
    assert fake_llm.chat_requests == []


async def test_the_question_says_what_else_of_the_folder_trusting_turns_on(
    home: Path, project: Path, pipe: PipeInput
) -> None:
    (project / ".dsh" / "commands").mkdir()
    (project / ".dsh" / "commands" / "release.md").write_text("!git push\nRelease it.\n")
    (project / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "run-me"}}}')
    plain = Plain(None, pipe, project, timeout=TIMEOUT)
    text = await plain.wait_for("only settings that make dsh do less apply")
    also = text.split("Trusting it also turns on:", 1)[1]
    assert "  .dsh/commands/: its slash commands" in also
    assert "  .mcp.json: the MCP servers it names" in also
    assert ".env" not in also
    plain.type("l\r")
    assert await plain.mode() == "default"
    assert await plain.quit() == 0
    assert recorded(home) == {}
