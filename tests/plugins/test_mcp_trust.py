"""The mcp plugin and project trust: a project's servers start only once it is
trusted, and a bad or writable-by-others configuration is refused, not raised.

Every wait is bounded by HANG_S (a hang guard, never a timing assertion).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.plugins.mcp_support import FIXTURE, PY, service_of, started, stdio_table
from tests.support.waits import HANG_S


def hostile_project(root: Path) -> tuple[Path, Path]:
    """A project whose .dsh/settings.toml and .mcp.json each start a program that
    writes a marker file."""
    project = root / "project"
    (project / ".dsh").mkdir(parents=True)
    marker_a, marker_b = project / "from-settings", project / "from-mcp-json"
    (project / ".dsh" / "settings.toml").write_text(
        stdio_table("evil", "-c", f"open({str(marker_a)!r}, 'w').write('ran')")
    )
    (project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "evil2": {
                        "command": PY,
                        "args": ["-c", f"open({str(marker_b)!r}, 'w').write('ran')"],
                    }
                }
            }
        )
    )
    return marker_a, marker_b


@pytest.mark.parametrize("trust", [None, False], ids=["undecided", "untrusted"])
async def test_an_untrusted_project_starts_no_server(tmp_path: Path, trust: bool | None) -> None:
    marker_a, marker_b = hostile_project(tmp_path)
    runtime = await started(tmp_path, "", trust=trust)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        assert service_of(runtime).connections == {}
        [problem] = service_of(runtime).problems
        assert problem.endswith(
            ".mcp.json not used: this folder is not trusted (`dsh trust` uses it)"
        )
    finally:
        await runtime.aclose()
    assert not marker_a.exists()
    assert not marker_b.exists()


async def test_a_trusted_project_starts_its_servers(tmp_path: Path) -> None:
    marker_a, marker_b = hostile_project(tmp_path)
    runtime = await started(tmp_path, "", trust=True)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        assert sorted(service_of(runtime).connections) == ["evil", "evil2"]
    finally:
        await runtime.aclose()
    assert marker_a.read_text() == "ran"
    assert marker_b.read_text() == "ran"


async def test_a_trusted_projects_mcp_json_others_can_write_is_refused(tmp_path: Path) -> None:
    _, marker = hostile_project(tmp_path)
    (tmp_path / "project" / ".dsh" / "settings.toml").unlink()
    (tmp_path / "project" / ".mcp.json").chmod(0o666)  # anyone could have written it
    runtime = await started(tmp_path, "", trust=True)
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        assert service_of(runtime).connections == {}
        [problem] = service_of(runtime).problems
        assert "refused" in problem
        assert "can be written by other users" in problem
    finally:
        await runtime.aclose()
    assert not marker.exists()


async def test_a_project_with_only_mcp_json_uses_it_once_trusted(tmp_path: Path) -> None:
    from dsh.trust import TrustStore

    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"fixture": {"command": PY, "args": [str(FIXTURE), "stdio"]}}})
    )
    (tmp_path / "home").mkdir()
    TrustStore(tmp_path / "home").decide(project.resolve(), True)
    runtime = await started(tmp_path, "")
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [status] = service_of(runtime).statuses()
        assert (status.name, status.state) == ("fixture", "ready")
    finally:
        await runtime.aclose()


async def test_a_bad_table_is_reported_not_raised(tmp_path: Path) -> None:
    runtime = await started(tmp_path, '[mcp.servers.x]\nargs = ["no command"]\n')
    try:
        await asyncio.wait_for(service_of(runtime).settled(), HANG_S)
        [problem] = service_of(runtime).problems
        assert "settings.toml: mcp.servers.x" in problem
    finally:
        await runtime.aclose()
