"""The lsp plugin against a real language server (python-lsp-server, from the test
extras) on a small fixture project, with the fs plugin's real edit tools, every call
going through the tool pipeline (so the edit post hook runs as in a session).

Each test loads its own plugins and so starts its own server: nothing is shared
between tests, and disposing the context at the end must stop it.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.llm import user_text
from dsh.runtime import start_runtime
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.plugins.lsp_fixtures.harness import (
    BASE_CONFIG,
    FAKE_SERVER,
    PROJECT,
    Session,
    eventually,
    process_gone,
    session,
)


@pytest.fixture
async def py(tmp_path: Path) -> AsyncIterator[Session]:
    async with session(tmp_path) as started:
        yield started


# ---------------------------------------------------------------------- diagnostics


async def test_diagnostics_of_a_clean_and_a_broken_file(py: Session) -> None:
    assert await py.lsp("diagnostics", "pkg/app.py") == "No diagnostics."
    broken = py.cwd / "pkg/broken.py"
    broken.write_text('import os\n\nlabel = "😀" + missing\n')
    text = await py.lsp("diagnostics", "pkg/broken.py")
    assert text.splitlines() == [
        "pkg/broken.py:1:1 warning [pyflakes] 'os' imported but unused",
        "pkg/broken.py:3:15 error [pyflakes] undefined name 'missing'",
    ]


# ---------------------------------------------------------------------- edits


async def test_diagnostics_appear_after_an_edit_and_disappear_after_the_fix(py: Session) -> None:
    await py.ok("read", file_path="pkg/app.py")
    assert await py.lsp("diagnostics", "pkg/app.py") == "No diagnostics."  # the server runs

    edited = await py.ok(
        "edit",
        file_path="pkg/app.py",
        old_string="    circle = Circle(radius)",
        new_string="    circle = Circel(radius)",
    )
    assert edited.startswith("Edited pkg/app.py (+1 -1)")
    assert edited.endswith(
        "\n\nDiagnostics for pkg/app.py:\npkg/app.py:7:14 error [pyflakes] undefined name 'Circel'"
    )
    assert await py.lsp("diagnostics", "pkg/app.py") == (
        "pkg/app.py:7:14 error [pyflakes] undefined name 'Circel'"
    )

    fixed = await py.ok("edit", file_path="pkg/app.py", old_string="Circel(", new_string="Circle(")
    assert fixed.endswith("\n\nDiagnostics for pkg/app.py: none")
    assert await py.lsp("diagnostics", "pkg/app.py") == "No diagnostics."

    # A clean edit of a clean file stays quiet.
    quiet = await py.ok(
        "edit", file_path="pkg/app.py", old_string="area {area", new_string="area: {area"
    )
    assert "Diagnostics" not in quiet


async def test_queries_see_edits_made_through_the_file_tools(py: Session) -> None:
    await py.ok("read", file_path="pkg/geometry.py")
    assert "function area  line 17" in await py.lsp("document_symbols", "pkg/geometry.py")
    await py.ok(
        "multi_edit",
        file_path="pkg/geometry.py",
        edits=[
            {"old_string": '"""Shapes and their areas."""\n', "new_string": '"""Shapes."""\n\n\n'},
            {"old_string": "def area(", "new_string": "def surface("},
        ],
    )
    symbols = await py.lsp("document_symbols", "pkg/geometry.py")
    assert "function surface  line 19" in symbols
    # write replaces the whole file; the server gets the new text.
    await py.ok("write", file_path="pkg/geometry.py", content="def only() -> int:\n    return 1\n")
    assert await py.lsp("document_symbols", "pkg/geometry.py") == "function only  line 1"


async def test_files_changed_behind_the_tools_back_are_sent_again(py: Session) -> None:
    assert await py.lsp("diagnostics", "pkg/app.py") == "No diagnostics."
    # Another program (a shell command, git) rewrites the file: the next call sees it.
    app = py.cwd / "pkg/app.py"
    app.write_text(app.read_text().replace("circle = Circle(radius)", "circle = Nope(radius)"))
    assert "undefined name 'Nope'" in await py.lsp("diagnostics", "pkg/app.py")
    # And a deleted file is closed and reported missing.
    app.unlink()
    result = await py.run("lsp", operation="diagnostics", file_path="pkg/app.py")
    assert result.code == "FS_NOT_FOUND"
    assert all(app not in s.documents for s in py.service.running())


async def test_the_first_edit_starts_the_server_and_reports(py: Session) -> None:
    """A cold session: no server runs until the model edits a Python file, and that
    first edit gets its diagnostics."""
    await py.ok("read", file_path="pkg/app.py")
    assert py.service.status() == []  # reading starts none
    edited = await py.ok(
        "edit", file_path="pkg/app.py", old_string="Circle(radius)\n", new_string="Nope(radius)\n"
    )
    assert edited.endswith(
        "\n\nDiagnostics for pkg/app.py:\npkg/app.py:7:14 error [pyflakes] undefined name 'Nope'"
    )
    assert [row.running for row in py.service.status()] == [True]


async def test_an_edit_starts_no_server_when_told_not_to(tmp_path: Path) -> None:
    async with session(tmp_path, {**BASE_CONFIG, "start_on_edit": False}) as py:
        await py.ok("read", file_path="pkg/app.py")
        edited = await py.ok(
            "edit",
            file_path="pkg/app.py",
            old_string="Circle(radius)\n",
            new_string="Nope(radius)\n",
        )
        assert "Diagnostics" not in edited
        assert py.service.status() == []


async def test_an_edit_of_a_file_no_server_is_for_starts_none(py: Session) -> None:
    await py.ok("write", file_path="notes.txt", content="hello\n")
    assert py.service.status() == []


async def test_diagnostics_after_edit_can_be_turned_off(tmp_path: Path) -> None:
    async with session(tmp_path, {**BASE_CONFIG, "diagnostics_after_edit": False}) as py:
        await py.ok("read", file_path="pkg/app.py")
        assert await py.lsp("diagnostics", "pkg/app.py") == "No diagnostics."
        edited = await py.ok(
            "edit",
            file_path="pkg/app.py",
            old_string="Circle(radius)\n",
            new_string="Nope(radius)\n",
        )
        assert "Diagnostics" not in edited
        # The server still got the change.
        assert "undefined name 'Nope'" in await py.lsp("diagnostics", "pkg/app.py")


# ---------------------------------------------------------------------- errors


async def test_a_language_without_a_server_says_how_to_install_one(tmp_path: Path) -> None:
    config = {"servers": {"rust": {"command": ["dsh-no-such-rust-analyzer"]}}}
    async with session(tmp_path, config, with_fs=False) as py:
        (py.cwd / "main.rs").write_text("fn main() {}\n")
        text = await py.fails("lsp", "LSP_UNAVAILABLE", operation="document_symbols",
                              file_path="main.rs")  # fmt: skip
        assert "'dsh-no-such-rust-analyzer' was not found" in text
        assert "rustup component add rust-analyzer" in text
        assert py.service.running() == []


async def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    config = {
        "servers": {"python": {"command": [sys.executable, str(FAKE_SERVER), "silent"]}},
        "request_timeout_s": 1,
    }
    async with session(tmp_path, config, with_fs=False) as py:
        text = await py.fails("lsp", "LSP_TIMEOUT", operation="document_symbols",
                              file_path="pkg/app.py")  # fmt: skip
        assert "did not answer initialize within 1 s" in text
        assert py.service.running() == []  # the half-started process was stopped


async def test_a_request_that_times_out_is_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "received.log"
    command = [sys.executable, str(FAKE_SERVER), "hang", str(log)]
    config = {"servers": {"python": {"command": command}}, "request_timeout_s": 1}
    async with session(tmp_path, config, with_fs=False) as py:
        text = await py.fails("lsp", "LSP_TIMEOUT", operation="hover", file_path="pkg/app.py",
                              line=8, character=21)  # fmt: skip
        assert "did not answer textDocument/hover within 1 s" in text
        await eventually(lambda: "$/cancelRequest" in log.read_text())
        assert log.read_text().splitlines()[:3] == [
            "initialize",
            "initialized",
            "textDocument/didOpen",
        ]
        assert len(py.service.running()) == 1  # a slow answer is not a dead server


async def test_a_crash_fails_the_call_in_flight_and_the_next_call_restarts(
    tmp_path: Path,
) -> None:
    command = [sys.executable, str(FAKE_SERVER), "crash"]
    async with session(tmp_path, {"servers": {"python": {"command": command}}}) as py:
        hover = {"operation": "hover", "file_path": "pkg/app.py", "line": 8, "character": 21}
        text = await py.fails("lsp", "LSP_SERVER_CRASHED", **hover)
        assert "python language server (python" in text
        assert "exited with code 3" in text
        assert "RuntimeError: boom" in text
        assert "The next call starts it again." in text
        again = await py.fails("lsp", "LSP_SERVER_CRASHED", **hover)
        assert "exited with code 3" in again
        [status] = py.service.status()
        assert status.starts == 2


async def test_a_server_that_keeps_crashing_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("plugins.lsp.supervisor.BACKOFF_BASE_S", 0.01)
    command = [sys.executable, str(FAKE_SERVER), "crash"]
    async with session(tmp_path, {"servers": {"python": {"command": command}}}) as py:
        hover = {"operation": "hover", "file_path": "pkg/app.py", "line": 8, "character": 21}
        for _ in range(5):
            await py.fails("lsp", "LSP_SERVER_CRASHED", **hover)
            await eventually(lambda: py.service.running() == [])
        text = await py.fails("lsp", "LSP_SERVER_CRASHED", **hover)
        assert "failed 5 times in a row, so dsh stopped restarting it" in text
        assert "RuntimeError: boom" in text
        assert py.service.status()[0].starts == 5


async def test_a_killed_server_is_restarted_by_the_next_call(py: Session) -> None:
    definition = {"line": 8, "character": 21}
    expected = "pkg/geometry.py:17:5  def area(circle: Circle) -> float:"
    assert await py.lsp("definition", "pkg/app.py", **definition) == expected
    first = py.pid()
    os.kill(first, signal.SIGKILL)
    await eventually(lambda: py.service.running() == [])
    # Transparent: the restart waits out the short backoff inside the call.
    assert await py.lsp("definition", "pkg/app.py", **definition) == expected
    assert py.pid() != first
    assert py.service.status()[0].starts == 2
    assert await py.lsp("diagnostics", "pkg/app.py") == "No diagnostics."


async def test_disposing_the_plugin_shuts_the_server_down(tmp_path: Path) -> None:
    async with session(tmp_path) as py:
        await py.lsp("document_symbols", "pkg/app.py")
        pid = py.pid()
        assert not process_gone(pid)
    assert process_gone(pid)


# ---------------------------------------------------------------------- a session


async def test_a_model_sees_the_diagnostics_of_its_edit(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole way: the plugin discovered and configured by the runtime, the model's
    calls run by an agent, the diagnostics in the tool result the model is sent."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    runtime = await start_runtime(
        home=tmp_path / "home",
        cwd=project,
        plugin_configs={"llm-deepseek": {"base_url": fake_llm.base_url}, "lsp": BASE_CONFIG},
        permission_mode="accept-edits",
    )
    try:
        fake_llm.add(
            Reply(
                tool_calls=[
                    ToolCallSpec(name="read", arguments={"file_path": "pkg/app.py"}),
                    ToolCallSpec(
                        name="lsp",
                        arguments={"operation": "diagnostics", "file_path": "pkg/app.py"},
                    ),
                ]
            )
        )
        edit = {
            "file_path": "pkg/app.py",
            "old_string": "circle = Circle(radius)",
            "new_string": "circle = Circel(radius)",
        }
        fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="edit", arguments=edit)]))
        fake_llm.add(Reply(text="I broke it."))
        agent = await runtime.agents.create(project)
        agent.followup(user_text("rename something"))
        await agent.when_idle()
        results = [
            [m["content"] for m in request.body["messages"] if m["role"] == "tool"]
            for request in fake_llm.chat_requests
        ]
        assert results[1][1] == "No diagnostics."
        assert results[2][-1].endswith(
            "Diagnostics for pkg/app.py:\npkg/app.py:7:14 error [pyflakes] undefined name 'Circel'"
        )
    finally:
        await runtime.aclose()
