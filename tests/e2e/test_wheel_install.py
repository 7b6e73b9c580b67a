"""dsh as a user gets it (issue 43): the wheel ``python -m build`` makes, checked with
``twine check``, installed into a fresh venv with no network, runs there.

The build is offline (``--no-isolation``: the backend is the test environment's) and
happens once for the module. The venv gets the dsh wheel alone (``--no-index
--no-deps``); its dependencies are the test environment's installed packages, reached
by a ``.pth`` line naming their folder (a folder named in a ``.pth`` file is put on
``sys.path`` without its own ``.pth`` files being run, so the checkout's editable
install does not come along). So dsh, its bundled plugins and their data come from
the wheel only, and ``import plugins`` must fail there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

import dsh
from dsh.testing import FakeLLM, Reply, Script, ToolCallSpec
from tests.e2e.test_acceptance import (
    APPROVAL,
    OPENING,
    QUESTION,
    answer_dialog,
    prompt_text,
    quit_dsh,
    turn_ended,
)
from tests.support.tmux import TIMEOUT, TMUX, Terminal, child_env, says

ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT = 300  # a hang guard for each build or install step on a loaded machine


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def dsh(self) -> Path:
        return self.venv / "bin" / "dsh"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """No PYTHONPATH (a checkout on it would hide what the wheel lacks), and the
        venv's bin first, as an activated venv or ``uv tool`` has it."""
        env = dict(os.environ if base is None else base)
        env.pop("PYTHONPATH", None)
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env


def run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=STEP_TIMEOUT, **kwargs
    )  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    # sdist first, then the wheel from the sdist: what the sdist lacks, the wheel lacks.
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, ROOT)
    wheels = sorted(dist.glob("dsh_agent-*.whl"))
    sdists = sorted(dist.glob("dsh_agent-*.tar.gz"))
    assert len(wheels) == 1, sorted(dist.iterdir())
    assert len(sdists) == 1, sorted(dist.iterdir())
    run(sys.executable, "-m", "twine", "check", "--strict", *wheels, *sdists)

    venv = work / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    site = Path(
        run(
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ).stdout.strip()
    )
    run(
        sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
        "--no-index", "--no-deps", "--no-cache-dir", wheels[0],
    )  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "test-environment.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    return Installed(venv, wheels[0])


def test_the_wheel_holds_dsh_its_plugins_and_their_data_and_no_plugins_package(
    installed: Installed,
) -> None:
    import zipfile

    names = zipfile.ZipFile(installed.wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"dsh", "dsh_plugins", installed.wheel.name.split("-py3")[0] + ".dist-info"}
    for data in (
        "dsh/themes/dsh-dark.toml",
        "dsh_plugins/demo.json",
        "dsh_plugins/llm_deepseek/models.toml",
    ):
        assert data in names


def test_in_the_venv_dsh_comes_from_the_wheel_and_plugins_is_no_package(
    installed: Installed, tmp_path: Path
) -> None:
    probe = (
        "import json, dsh, dsh_plugins\n"
        "from dsh.ui.tui.theming import bundled_themes_folder\n"
        "print(json.dumps([dsh.__file__, dsh_plugins.__file__, str(bundled_themes_folder())]))"
    )
    found = json.loads(run(installed.python, "-c", probe, cwd=tmp_path, env=installed.env()).stdout)
    assert all(path.startswith(str(installed.venv)) for path in found), found
    assert found[2].endswith("dsh/themes")

    missing = subprocess.run(
        [str(installed.python), "-c", "import plugins"],
        capture_output=True, text=True, timeout=STEP_TIMEOUT, cwd=tmp_path, env=installed.env(),
    )  # fmt: skip
    assert missing.returncode == 1
    assert "ModuleNotFoundError: No module named 'plugins'" in missing.stderr


def test_version_and_every_bundled_plugin_load_from_the_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    version = run(installed.dsh, "--version", cwd=tmp_path, env=installed.env())
    assert version.stdout.strip() == f"dsh {dsh.__version__}"  # a release: no commit

    env = installed.env()
    env["DSH_HOME"] = str(tmp_path / "home")
    listing = json.loads(run(installed.dsh, "plugins", "--json", cwd=tmp_path, env=env).stdout)
    bundled = [p for p in listing if p["origin"].startswith("bundled dsh_plugins.")]
    assert {"bash", "fs", "llm-deepseek", "mcp", "lsp"} <= {p["name"] for p in bundled}
    assert [p for p in listing if p["status"] == "failed"] == []


def test_headless_run_against_the_scripted_server(installed: Installed, tmp_path: Path) -> None:
    """``dsh -p``, and a grep through the rg the ripgrep package installs."""
    (tmp_path / "notes.txt").write_text("the kestrel nests here\n")
    script = Script(
        replies=[
            Reply(tool_calls=[ToolCallSpec(name="grep", arguments={"pattern": "kestrel"})]),
            Reply(text="Found it in notes.txt."),
        ]
    )
    import asyncio

    async def scenario() -> tuple[subprocess.CompletedProcess[str], list[str]]:
        async with FakeLLM(script) as server:
            env = installed.env(child_env(tmp_path / "home", server))
            result = await asyncio.to_thread(
                subprocess.run,
                [str(installed.dsh), "-p", "where is the kestrel?", "--permission-mode", "bypass"],
                capture_output=True, text=True, timeout=STEP_TIMEOUT, cwd=tmp_path, env=env,
            )  # fmt: skip
            tool_results = [
                str(message.get("content"))
                for request in server.chat_requests
                for message in request.body.get("messages", [])
                if message.get("role") == "tool"
            ]
            return result, tool_results

    (tmp_path / "home").mkdir()
    result, tool_results = asyncio.run(scenario())
    assert result.returncode == 0, result.stderr
    assert "Found it in notes.txt." in result.stdout
    assert any("notes.txt" in text and "kestrel" in text for text in tool_results), tool_results


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
async def test_the_demo_runs_to_its_end_from_the_wheel(
    installed: Installed, tmp_path: Path, terminal: Terminal
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    user = tmp_path / "user"
    (user / ".dsh").mkdir(parents=True)
    env = installed.env()
    for name in [k for k in env if k.startswith(("DSH_", "DEEPSEEK_", "OPENAI_", "TMUX"))]:
        del env[name]
    env.update(HOME=str(user), DSH_HOME=str(user / ".dsh"), TMPDIR=str(temp))
    await terminal.start(
        ["env", "TERM=xterm-256color", str(installed.dsh), "--demo"], tmp_path, env
    )

    await terminal.wait_for(
        lambda text: (prompt_text(text) or "").startswith("Have a look at greet.py"),
        limit=2 * TIMEOUT,
    )
    await terminal.wait_for(says(OPENING))
    await terminal.keys("Enter")
    assert "edit greet.py" in await answer_dialog(terminal, APPROVAL, "y")
    assert "python3 greet.py" in await answer_dialog(terminal, APPROVAL, "y")
    assert "Should I add a test" in await answer_dialog(terminal, QUESTION, "Enter")
    screen = await terminal.wait_for(turn_ended("turn 1 · completed"), limit=2 * TIMEOUT)
    assert "That was the whole demo" in screen
    await quit_dsh(terminal)
    assert sorted(temp.glob("dsh-demo-*")) == []


EXAMPLE = ROOT / "tests" / "fixtures" / "dsh-plugin-example"
MISFIT = '''\
"""A listener of the wrong shape for the prompt-submit chain."""

from __future__ import annotations

from dsh.hooks import AGENT_PROMPT_SUBMIT
from dsh.kernel import Context


def listener(text: str) -> int:
    return len(text)


def apply(ctx: Context) -> None:
    ctx.on(AGENT_PROMPT_SUBMIT, listener)
'''


def test_mypy_checks_an_outside_plugin_against_the_installed_dsh(
    installed: Installed, tmp_path: Path
) -> None:
    """The typed plugin API holds outside the repository: with the wheel's ``py.typed``,
    mypy reads the installed dsh's types, passes the installed example plugin and
    refuses a listener of the wrong shape (without it, dsh is ``Any`` and both pass)."""
    run(
        sys.executable, "-m", "pip", "--python", installed.python, "install", "--no-index",
        "--no-deps", "--no-build-isolation", "--no-cache-dir", "--quiet", EXAMPLE,
    )  # fmt: skip
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\nplugins = pydantic.mypy\n")
    mypy = [sys.executable, "-m", "mypy", "--python-executable", str(installed.python)]
    mypy += ["--no-incremental", "--cache-dir", os.devnull]

    checked = subprocess.run(
        [*mypy, "--verbose", "-p", "dsh_example"],
        capture_output=True, text=True, timeout=STEP_TIMEOUT, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr[-3000:]
    assert "Success: no issues found" in checked.stdout
    # Both the plugin and dsh were read where pip put them, not from the checkout.
    parsed = [line for line in checked.stderr.splitlines() if "Parsing " in line]
    hooks = [line for line in parsed if line.rstrip().endswith("(dsh.hooks)")]
    plugin = [line for line in parsed if line.rstrip().endswith("(dsh_example.tool)")]
    assert hooks, parsed[:20]
    assert plugin, parsed[:20]
    assert str(installed.venv) in hooks[0], hooks
    assert str(installed.venv) in plugin[0], plugin

    (tmp_path / "misfit.py").write_text(MISFIT)
    refused = subprocess.run(
        [*mypy, "misfit.py"],
        capture_output=True, text=True, timeout=STEP_TIMEOUT, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stdout
    assert 'misfit.py:14: error: Cannot infer value of type parameter "L" of "on"' in refused.stdout
    assert "import-untyped" not in refused.stdout
