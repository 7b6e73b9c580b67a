"""The workspace trust question in plain mode: ``run_plain`` starting its own runtime
in a cloned project whose ``.dsh/settings.toml`` asks for ``bypass``, answered
through a pipe; and a script on stdin, which nobody is there to ask."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input

from dsh.testing import FakeLLM
from dsh.ui.plain import PlainRequest, run_plain

TIMEOUT = 30.0
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


@pytest.fixture
def pipe() -> Iterator[PipeInput]:
    with create_pipe_input() as created:
        yield created


class Plain:
    """``run_plain`` with no runtime of its own: it settles trust and starts one."""

    def __init__(self, pipe: PipeInput, cwd: Path) -> None:
        self.pipe = pipe
        self.out = io.StringIO()
        self.task = asyncio.create_task(
            run_plain(PlainRequest(cwd=cwd), input=pipe, output=self.out)
        )

    @property
    def text(self) -> str:
        return self.out.getvalue()

    def type(self, text: str) -> None:
        self.pipe.send_text(text)

    async def wait_for(self, needle: str) -> str:
        async def poll() -> None:
            while needle not in self.text:
                if self.task.done():
                    raise AssertionError(f"plain mode ended: {self.task.result()}\n{self.text}")
                await asyncio.sleep(0.01)

        try:
            await asyncio.wait_for(poll(), TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"{needle!r} never printed:\n{self.text}") from None
        return self.text

    async def mode(self) -> str:
        """The permission mode in force, as ``/permissions`` says it."""
        before = len(self.text)
        self.type("/permissions\r")
        await self.wait_for("Permission mode: ")
        line = next(line for line in self.text[before:].splitlines() if "Permission mode: " in line)
        return line.split("Permission mode: ", 1)[1].strip()

    async def quit(self) -> int:
        self.type("\x04")  # Ctrl+D
        return await asyncio.wait_for(self.task, TIMEOUT)


def recorded(home: Path) -> dict[str, bool]:
    """``trust.toml`` as folder -> trusted; empty when there is no file."""
    path = home / "trust.toml"
    if not path.exists():
        return {}
    folders = tomllib.loads(path.read_text())["folders"]
    return {name: entry["trusted"] for name, entry in folders.items()}


async def test_the_question_names_each_key_and_trust_applies_it(
    home: Path, project: Path, pipe: PipeInput
) -> None:
    plain = Plain(pipe, project)
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
    plain = Plain(pipe, project)
    await plain.wait_for(QUESTION)
    plain.type("n\r")
    await plain.wait_for('ignored permissions.mode = "bypass"')
    assert await plain.mode() == "default"
    assert await plain.quit() == 0
    assert recorded(home) == {str(project): False}


async def test_the_end_of_input_decides_later(home: Path, project: Path, pipe: PipeInput) -> None:
    plain = Plain(pipe, project)
    await plain.wait_for(QUESTION)
    plain.type("\x04")  # Ctrl+D at the question
    await plain.wait_for('ignored permissions.mode = "bypass"')
    assert await plain.mode() == "default"
    assert await plain.quit() == 0
    assert recorded(home) == {}
    # Decided later: the next start asks again.
    with create_pipe_input() as again:
        second = Plain(again, project)
        await second.wait_for(QUESTION)
        again.close()  # the input ends: later, then plain mode ends too
        assert await asyncio.wait_for(second.task, TIMEOUT) == 0
    assert recorded(home) == {}


async def test_a_script_on_stdin_is_not_asked(home: Path, project: Path, fake_llm: FakeLLM) -> None:
    code = (
        "import asyncio, sys; from dsh.ui.plain import PlainRequest, run_plain; "
        "sys.exit(asyncio.run(run_plain(PlainRequest())))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        cwd=project,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(b"/permissions\n"), 60)
    assert child.returncode == 0, err.decode()
    text = out.decode()
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
