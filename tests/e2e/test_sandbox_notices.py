"""What ``dsh -p`` says about the sandbox at start-up (issue 37), through the real
binary: a ``dsh: …`` line on stderr, once, when the sandbox is off or cannot start
(saying why), and nothing when a project's settings try to turn it off."""

from __future__ import annotations

import pytest

from dsh.testing import FakeLLM, Reply
from tests.e2e.harness import SETTINGS, Dsh

OFF = "the sandbox is off"
CANNOT_START = "the sandbox cannot start"


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    dsh.home_of_its_own()
    return dsh


def sandbox_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "sandbox" in line]


async def test_sandbox_off_is_said_once_on_stderr(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "hello", "--sandbox", "off")
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "Done."
    lines = sandbox_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"dsh: {OFF}")


async def test_a_working_sandbox_says_nothing(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr
    assert sandbox_lines(done.stderr) == []


async def test_a_sandbox_that_cannot_start_is_said_once_with_why(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    (dsh.home / "settings.toml").write_text(
        SETTINGS + '[sandbox]\nprogram = "/nonexistent/bwrap"\n'
    )
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr
    lines = sandbox_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"dsh: {CANNOT_START}: ")
    assert "'/nonexistent/bwrap' is not an executable file" in lines[0]


@pytest.mark.parametrize("trusted", [True, False])
async def test_a_project_cannot_turn_the_sandbox_off(
    dsh: Dsh, fake_llm: FakeLLM, trusted: bool
) -> None:
    (dsh.project / ".git").mkdir()
    (dsh.project / ".dsh").mkdir()
    (dsh.project / ".dsh" / "settings.toml").write_text('[sandbox]\npolicy = "off"\n')
    fake_llm.add(Reply(text="Done."))
    done = await dsh.run("-p", "hello", *(["--trust"] if trusted else []))
    assert done.code == 0, done.stderr
    assert OFF not in done.stderr
    lines = sandbox_lines(done.stderr)
    if trusted:
        assert lines == []
    else:
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("dsh: ignored sandbox.policy")
        assert "would widen the sandbox from workspace-write to off" in lines[0]
        # Trust would not apply it either: the line must not promise that it would.
        assert lines[0].endswith("a project's settings, trusted or not, may only narrow it")
