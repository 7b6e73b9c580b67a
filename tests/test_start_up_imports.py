"""What start-up imports: the bundled plugins are found, and the runtime comes up with
a session open, without the libraries only a later action needs (an MCP server, a
terminal, a request to the model, a setup writing settings, the TUI's own).

Each check runs in a fresh ``python`` (a test process has imported everything long
before) and reads ``sys.modules`` there: what it asserts is what was imported, never
how long it took."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

DEFERRED = (
    "httpx",  # the model's HTTP client: at the first request
    "httpx2",  # the MCP SDK's
    "mcp",
    "tree_sitter",
    "pyte",
    "rapidfuzz",
    "ptyprocess",  # the terminal plugin's, at the first terminal
    "tomlkit",  # writing settings (the first-run setup)
    "textual",
    "rich",
    "xml.sax",  # the skills' catalog escapes with it (and it imports urllib.request)
    "urllib.request",
    "http.client",
)
TUI_DEFERRED = (
    "markdown_it",  # rich's Markdown: at the first answer or plan shown
    "pygments",  # rich's Syntax: at the first code shown
)
"""What the TUI's own modules for a running session leave to their first use."""


def imported_by(code: str, tmp_path: Path, deferred: tuple[str, ...] = DEFERRED) -> list[str]:
    """The modules of ``deferred`` that ``code`` left imported in a new process."""
    probe = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import json, sys
        print(json.dumps(sorted(m for m in {deferred!r} if m in sys.modules)))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env.update(DSH_HOME=str(tmp_path / "home"), DEEPSEEK_API_KEY="sk-test")
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_discovering_the_bundled_plugins_imports_none_of_their_heavy_libraries(
    tmp_path: Path,
) -> None:
    code = """
        from dsh.kernel import discover
        found = discover()
        failed = [c.name for c in found if c.plugin is None]
        assert not failed, failed
        assert {"bash", "fs", "lsp", "mcp", "terminal", "web"} <= {c.name for c in found}
    """
    assert imported_by(code, tmp_path) == []


def test_the_runtime_up_with_a_session_open_has_imported_none_of_them(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    code = """
        import asyncio
        from pathlib import Path

        from dsh.agent import AgentOptions
        from dsh.kernel import PluginStatus
        from dsh.runtime import start_runtime

        async def main() -> None:
            runtime = await start_runtime(cwd=Path("project").resolve())
            try:
                failed = [r.name for r in runtime.plugins.records
                          if r.status is not PluginStatus.LOADED]
                assert not failed, failed
                await runtime.agents.create(Path("project").resolve(), AgentOptions())
            finally:
                await runtime.aclose()

        asyncio.run(main())
    """
    assert imported_by(code, tmp_path) == []


def test_the_tui_with_its_session_modules_has_not_imported_markdown_or_highlighting(
    tmp_path: Path,
) -> None:
    code = """
        import importlib

        from dsh.ui.tui.app import HEAVY_MODULES, PREVIEW_MODULES

        for name in (*PREVIEW_MODULES, *HEAVY_MODULES):
            importlib.import_module(name)
    """
    assert imported_by(code, tmp_path, TUI_DEFERRED) == []
