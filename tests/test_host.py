"""The machine facts the model is told (platform, shell): gathered once, provided as
the ``host`` service, kept in each new session's header."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.host import HostFacts
from dsh.llm import user_text
from dsh.prompt import PromptContext
from dsh.runtime import start_runtime
from dsh.services import HOST, PROMPT


def test_this_machine_says_unknown_without_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHELL", raising=False)
    assert HostFacts.this_machine().login_shell == "unknown"
    monkeypatch.setenv("SHELL", "/usr/bin/fish")
    assert HostFacts.this_machine().login_shell == "/usr/bin/fish"


async def test_given_facts_reach_the_prompt_and_the_stored_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHELL", "/bin/bash")
    elsewhere = HostFacts(platform="Plan9 4", login_shell="/bin/rc")
    home = tmp_path / "home"
    home.mkdir()
    runtime = await start_runtime(home=home, cwd=tmp_path, host=elsewhere)
    try:
        assert runtime.root.get(HOST) == elsewhere
        pc = PromptContext(agent=None, scope=None, cwd=tmp_path, provider="p", model="m")
        assembly = await runtime.root.get(PROMPT).assemble(pc)
        assert "- Platform: Plan9 4\n- Shell: /bin/rc" in assembly.system
        session = await runtime.sessions.create(str(tmp_path))
        session.append("user/message", user_text("hello"))  # an empty session is not stored
        await runtime.sessions.flush(session)
        stored = await runtime.sessions.persistence.load(session.id)
    finally:
        await runtime.aclose()
    assert stored.header.host == elsewhere
