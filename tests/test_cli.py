from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import dsh

ROOT = Path(__file__).resolve().parent.parent


def dsh_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh", *args], capture_output=True, text=True, timeout=60
    )


def test_version_of_a_checkout_names_its_commit() -> None:
    result = dsh_cmd("--version")
    assert result.returncode == 0
    if not (ROOT / ".git").exists():  # an unpacked sdist: nothing to name
        assert result.stdout.strip() == f"dsh {dsh.__version__}"
        return
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert result.stdout.strip() == f"dsh {dsh.__version__} (commit {head})"


def test_version_without_git_is_the_version_alone() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/nonexistent"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"dsh {dsh.__version__}"


def test_help_names_every_command() -> None:
    result = dsh_cmd("--help")
    assert result.returncode == 0
    assert "plugins" in result.stdout
    assert "--version" in result.stdout


def test_unknown_options_are_a_clear_error() -> None:
    result = dsh_cmd("--frobnicate")
    assert result.returncode == 2
    assert "unrecognized arguments: --frobnicate" in result.stderr
    bad = dsh_cmd("sessions", "frobnicate")
    assert bad.returncode == 2
    assert "invalid choice: 'frobnicate'" in bad.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "dsh"
    assert script.exists(), "run the README's setup command: pip install -e '.[test]'"
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert result.stdout.startswith("dsh ")


def test_cli_parsing_imports_nothing_heavy() -> None:
    probe = (
        "import sys, dsh.cli; print(sorted(m for m in ('pydantic', 'asyncio') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", quick, re.S)


def test_readme_quick_start_has_two_commands_and_ci_runs_the_test_one() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    start, test = commands
    assert start.rstrip().endswith("dsh")
    assert "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text()


def test_the_lock_pins_every_declared_dependency() -> None:
    """constraints.txt (what the README's commands install with) names every
    dependency and test dependency of pyproject.toml at one exact version."""
    import tomllib

    from packaging.requirements import Requirement

    def key(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    pinned: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line}"
            pinned[key(name)] = version
    for spec in declared:
        requirement = Requirement(spec)
        name = key(requirement.name)
        assert name in pinned, f"{requirement.name} is not in constraints.txt: run .ci/lock"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {requirement.name} {pinned[name]}, outside {spec}"
        )


def test_plain_mode_runs_a_script_from_stdin(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "DSH_HOME": str(tmp_path / "home"),
        "DEEPSEEK_API_KEY": "unused",
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "--plain", "--cwd", str(tmp_path)],
        input="/permissions\n/exit\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "Permission mode: default" in result.stdout
    assert "\x1b[" not in result.stdout


def test_headless_never_imports_a_ui_toolkit() -> None:
    probe = (
        "import sys, dsh.ui.headless, dsh.runtime; "
        "print(sorted(m for m in ('textual', 'prompt_toolkit', 'rich') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_only_dsh_acp_imports_the_acp_sdk() -> None:
    # The SDK (its schema is thousands of pydantic models) is dsh acp's alone: dsh,
    # dsh -p and the plugins a runtime loads never pay for it.
    probe = (
        "import sys, dsh.cli, dsh.ui.headless, dsh.runtime, dsh.frontend, plugins.mcp; "
        "print(sorted(m for m in sys.modules if m == 'acp' or m.startswith('acp.')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    probe = "import sys, dsh.ui.acp.server; print('acp' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "True"  # the probe above would see it


def test_the_interactive_ui_needs_a_terminal() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dsh"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "needs a terminal" in result.stderr
    assert "-p" in result.stderr


def test_resume_without_an_id_needs_the_interactive_ui() -> None:
    result = dsh_cmd("-p", "hi", "--resume")
    assert result.returncode == 2
    assert "needs a session id after --resume" in result.stderr


def test_the_tui_module_loads_its_runtime_after_the_first_frame() -> None:
    probe = (
        "import sys, dsh.cli, dsh.ui.tui.launch, dsh.ui.tui.app; "
        "print(sorted(m for m in ('pydantic', 'httpx', 'dsh.runtime', 'dsh.session') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_plugin_commands_are_tried_only_where_no_prompt_can_be() -> None:
    from dsh.cli import _maybe_plugin_command, _plugin_command

    assert _maybe_plugin_command(["mcp", "list"])
    # One word: a plugin's command (``dsh mcp`` says its actions), else a prompt.
    assert _maybe_plugin_command(["mcp"])
    assert _plugin_command(["hello"]) is None
    assert not _maybe_plugin_command(["fix the build", "--plain"])
    assert not _maybe_plugin_command(["hello", "-p"])
    assert _maybe_plugin_command(["mcp", "--help"])  # no plugin's: the usual usage
    assert not _maybe_plugin_command(["Fix", "it"])


def test_a_plugin_command_needs_a_plain_name() -> None:
    import pytest

    from dsh.kernel import CliCommand, PluginDefinitionError

    with pytest.raises(PluginDefinitionError, match="must match"):
        CliCommand(name="Bad Name", help="", configure=lambda p: None, run=lambda a, h: 0)
