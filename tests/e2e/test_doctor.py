"""``dsh doctor`` through the real binary (issue 41): a working setup passes every
check and exits 0; each broken part (no key, a refused key, an unreachable endpoint,
a settings file that does not parse, a language server's missing command, an MCP
server that fails) is named with its fix and exits 1; the key is never printed."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

from dsh.testing import FakeLLM, Reply
from tests.e2e.harness import SETTINGS, Dsh, Finished

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"
KEY = "sk-doctor-0123456789abcdef"


def mcp_server(name: str, *args: str) -> str:
    listed = ", ".join(json.dumps(a) for a in args)
    return f"[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = [{listed}]\n"


def lsp_server(name: str, command: str) -> str:
    return f"[plugins.lsp.servers.{name}]\ncommand = [{json.dumps(command)}]\n"


def checks(done: Finished) -> dict[str, dict[str, Any]]:
    report = json.loads(done.stdout)
    return {check["name"]: check for check in report["checks"]}


def require(server: FakeLLM, key: str) -> None:
    """Have the server answer 401 to any request without ``key``."""
    server.script = server.script.model_copy(update={"require_key": key})


def closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_working_setup_passes_every_check(dsh: Dsh, fake_llm: FakeLLM) -> None:
    dsh.key = KEY
    require(fake_llm, KEY)
    (dsh.home / "settings.toml").write_text(
        SETTINGS
        + mcp_server("fixture", str(FIXTURE), "stdio")
        + lsp_server("python", sys.executable)
    )
    fake_llm.add(Reply(text="OK"))

    done = await dsh.run("doctor", "--live", "--json", "--timeout", "60")

    assert done.code == 0, done.stdout + done.stderr
    found = checks(done)
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert [c for c in report["checks"] if c["status"] == "fail"] == []
    assert all(c["fix"] for c in report["checks"] if c["status"] != "ok")
    assert found["deepseek key"]["detail"] == "DEEPSEEK_API_KEY found in the environment"
    endpoint = found["deepseek endpoint"]
    assert endpoint["status"] == "ok"
    assert f"answered 200, {len(fake_llm.script.models)} models" in endpoint["detail"]
    assert found["deepseek live request (deepseek-flash)"]["status"] == "ok"
    assert [r.body["max_tokens"] for r in fake_llm.chat_requests] == [1]
    assert found["mcp fixture"]["status"] == "ok"
    assert "tool" in found["mcp fixture"]["detail"]
    assert found["lsp python"] == {
        "area": "lsp",
        "name": "lsp python",
        "status": "ok",
        "detail": sys.executable,
        "fix": None,
    }
    assert found["rg"]["status"] == "ok"
    assert str(dsh.home / "settings.toml") in found["settings"]["detail"]
    assert KEY not in done.stdout + done.stderr

    lines = await dsh.run("doctor")

    assert lines.code == 0, lines.stdout + lines.stderr
    assert "✓ deepseek endpoint: " in lines.stdout
    assert "✓ mcp fixture: " in lines.stdout
    assert "✗" not in lines.stdout
    assert KEY not in lines.stdout + lines.stderr


async def test_no_key_is_named_with_where_to_put_it(dsh: Dsh, fake_llm: FakeLLM) -> None:
    dsh.key = None

    done = await dsh.run("doctor")

    assert done.code == 1, done.stdout + done.stderr
    assert (
        "✗ deepseek key: no DEEPSEEK_API_KEY in the environment, $DSH_HOME/credentials.json "
        "or a .env file (fix: export DEEPSEEK_API_KEY=..., or run `dsh` once to paste it in "
        "the setup)"
    ) in done.stdout
    assert "✗ deepseek endpoint: " in done.stdout
    assert "not asked: no key" in done.stdout
    assert fake_llm.requests == []  # nothing was sent without the key


async def test_a_refused_key_a_missing_language_server_and_a_failing_mcp_server(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    dsh.key = KEY
    require(fake_llm, "sk-another-key-altogether")
    (dsh.home / "settings.toml").write_text(
        SETTINGS
        + lsp_server("python", "no-such-language-server-41")
        + mcp_server("broken", "-c", "import sys; sys.stderr.write('no config'); sys.exit(2)")
    )

    done = await dsh.run("doctor", "--json", "--timeout", "60")

    assert done.code == 1, done.stdout + done.stderr
    found = checks(done)
    assert json.loads(done.stdout)["ok"] is False
    endpoint = found["deepseek endpoint"]
    assert endpoint["status"] == "fail"
    assert "answered 401" in endpoint["detail"]
    assert "check DEEPSEEK_API_KEY" in endpoint["fix"]
    lsp = found["lsp python"]
    assert (lsp["status"], lsp["detail"]) == (
        "fail",
        "command 'no-such-language-server-41' not found",
    )
    assert "[plugins.lsp.servers.python] command" in lsp["fix"]
    broken = found["mcp broken"]
    assert broken["status"] == "fail"
    assert "no config" in broken["detail"]
    assert "[mcp.servers.broken]" in broken["fix"]
    assert KEY not in done.stdout + done.stderr
    # The key went to the server, and only as a header: not in what doctor printed.
    [asked] = fake_llm.requests
    assert asked.path.endswith("/models")


async def test_an_unreachable_endpoint_is_named(dsh: Dsh, fake_llm: FakeLLM) -> None:
    dsh.key = KEY
    dsh.environment["DEEPSEEK_BASE_URL"] = f"http://127.0.0.1:{closed_port()}"

    done = await dsh.run("doctor", "--live")

    assert done.code == 1, done.stdout + done.stderr
    [endpoint] = [line for line in done.stdout.splitlines() if "deepseek endpoint" in line]
    assert endpoint.startswith("✗ deepseek endpoint: http://127.0.0.1:")
    assert "unreachable" in endpoint
    assert "(fix: check the provider's base_url in settings and the network)" in endpoint
    [live] = [line for line in done.stdout.splitlines() if "live request" in line]
    assert live.startswith("✗ ")
    assert "fix: " in live
    assert KEY not in done.stdout + done.stderr


async def test_a_settings_file_that_does_not_parse(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.home / "settings.toml").write_text("[agent\nmodel = 'x'\n")

    done = await dsh.run("doctor", "--json")

    assert done.code == 1, done.stdout + done.stderr
    found = checks(done)
    settings = found["settings"]
    assert settings["status"] == "fail"
    assert "not valid TOML" in settings["detail"]
    assert str(dsh.home / "settings.toml") in settings["detail"]
    assert "correct the file" in settings["fix"]
    assert found["git"]["status"] in ("ok", "warn")  # what needs no settings is still checked
