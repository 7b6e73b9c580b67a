"""Start-up files of other programs: what accept-edits never writes unasked.

The attack, through ``dsh -p`` against the scripted server: dsh works in the home
folder in accept-edits mode (writes in the working directory allowed unasked), and
the model writes files that make the next ``python3``, ``npm``, ``vim`` or a command
looked up in ``$PATH`` run its code: ``usercustomize.py`` and a ``.pth`` file in the
user's site-packages, ``~/.local/bin/ls``, ``~/.npmrc``, ``~/.vimrc``; and, in a
project, a ``.pth`` in the project's ``.venv``. Each must be asked (headless: not
run), nothing written; an ordinary file beside them is still written unasked. Then
the table, path by path.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.policy.permissions import Rule, assess
from dsh.policy.protected import command_protections, write_protection
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import Action, ToolDefinition
from tests.e2e.harness import Dsh
from tests.support.waits import HANG_S

SITE = f".local/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
PLANT = "open('PWNED', 'w').close()\n"


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    """An installation whose child runs with a home folder of the test's own."""
    dsh.home_of_its_own()
    return dsh


def write(path: str, content: str) -> ToolCallSpec:
    return ToolCallSpec(name="write", arguments={"file_path": path, "content": content})


def tool_texts(server: FakeLLM) -> list[str]:
    body = server.chat_requests[-1].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_accept_edits_in_home_writes_no_start_up_file(dsh: Dsh, fake_llm: FakeLLM) -> None:
    home = dsh.root / "userhome"
    planted = {
        f"{SITE}/usercustomize.py": PLANT,
        f"{SITE}/zz-evil.pth": "import os; os.system('touch PWNED')\n",
        ".local/bin/ls": "#!/bin/sh\ntouch PWNED\n",
        ".npmrc": "node-options=--require ./evil.js\n",
        ".vimrc": "autocmd VimEnter * !touch PWNED\n",
    }
    calls = [write(path, text) for path, text in planted.items()]
    calls.append(write("notes.txt", "an ordinary file\n"))  # the control
    fake_llm.add(Reply(tool_calls=calls), Reply(text="Done."))

    done = await dsh.run("-p", "set things up", "--permission-mode", "accept-edits", cwd=home)

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    for path, text in zip(planted, texts, strict=False):
        assert not (home / path).exists(), f"{path} was written unasked"
        assert text.startswith("Error: write was not run"), (path, text)
        assert "only --permission-mode bypass allows it" in text, (path, text)
    assert (home / "notes.txt").read_text() == "an ordinary file\n"
    assert not texts[-1].startswith("Error"), texts[-1]
    # And the next python3 runs nothing of the model's.
    env = {**os.environ, "HOME": str(home)}
    env.pop("PYTHONNOUSERSITE", None)
    python = await asyncio.create_subprocess_exec(
        "python3", "-c", "pass", cwd=home, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(python.communicate(), HANG_S)
    assert python.returncode == 0, err
    assert not (home / "PWNED").exists()


async def test_accept_edits_writes_no_pth_into_the_projects_venv(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    site = dsh.project / ".venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (dsh.project / "evil.pth").write_text("import os; os.system('touch PWNED')\n")
    (dsh.project / "settings.toml").write_text("")
    settings = dsh.home / "settings.toml"
    settings.write_text(settings.read_text() + '\n[permissions]\nallow = ["bash(cp:*)"]\n')
    fake_llm.add(
        Reply(
            tool_calls=[
                write(".venv/lib/python3.11/site-packages/evil.pth", "import os\n"),
                write(".venv/lib/python3.11/site-packages/sitecustomize.py", PLANT),
                ToolCallSpec(
                    name="bash",
                    arguments={
                        "command": "cp evil.pth .venv/lib/python3.11/site-packages/",
                        "description": "copy",
                    },
                ),
                write(".venv/lib/python3.11/site-packages/mypkg/util.py", "x = 1\n"),
                write("src/app.py", "print('hi')\n"),
            ]
        ),
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "fix the venv", "--permission-mode", "accept-edits")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert sorted(p.name for p in site.iterdir()) == ["mypkg"], texts
    for text in texts[:3]:
        assert text.startswith("Error: "), text
        assert "site-packages" in text or "when python starts" in text, text
    # The controls: a module of a package, and the project's own code.
    assert (site / "mypkg" / "util.py").read_text() == "x = 1\n"
    assert (dsh.project / "src" / "app.py").read_text() == "print('hi')\n"


# ---------------------------------------------------------------------- the table


class _Args(BaseModel):
    pass


async def _never(arguments: Any, context: Any) -> str:
    raise AssertionError("not run")


WRITE = ToolDefinition(name="write", description="", arguments=_Args, execute=_never)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DSH_HOME", str(home / ".dsh"))
    return home


STARTUP = [
    f"~/{SITE}/usercustomize.py",
    f"~/{SITE}/sitecustomize.py",
    f"~/{SITE}/sitecustomize/__init__.py",
    f"~/{SITE}/usercustomize.pyc",
    f"~/{SITE}/x.pth",
    "/usr/lib/python3/dist-packages/x.pth",
    "/opt/tool/venv/lib/python3.12/site-packages/sitecustomize.py",
    "~/.local/bin/ls",
    "~/bin/git",
    "~/.cargo/bin/cargo",
    "~/go/bin/gopls",
    "~/.pythonrc",
    "~/.pythonrc.py",
    "~/.config/python/startup.py",
    "~/.ipython/profile_default/startup/00.py",
    "~/.jupyter/jupyter_server_config.py",
    "~/.config/pip/pip.conf",
    "~/.pip/pip.conf",
    "~/.pypirc",
    "~/.pydistutils.cfg",
    "~/.condarc",
    "~/.npmrc",
    "~/.yarnrc",
    "~/.yarnrc.yml",
    "~/.config/yarn/config",
    "~/.cargo/config.toml",
    "~/.cargo/config",
    "~/.config/go/env",
    "~/.gemrc",
    "~/.irbrc",
    "~/.pryrc",
    "~/.Rprofile",
    "~/.vimrc",
    "~/.gvimrc",
    "~/.exrc",
    "~/.vim/plugin/x.vim",
    "~/.config/nvim/init.lua",
    "~/.emacs",
    "~/.emacs.d/init.el",
    "~/.config/emacs/init.el",
    "~/.nanorc",
    "~/.config/Code/User/settings.json",
    "~/.config/Code/User/tasks.json",
    "~/.config/autostart/x.desktop",
    "~/.config/direnv/direnvrc",
    "~/.inputrc",
    "~/.tmux.conf",
    "~/.config/tmux/tmux.conf",
    "~/.screenrc",
    "~/.curlrc",
    "~/.wgetrc",
    "~/.docker/config.json",
    "~/.config/containers/containers.conf",
    "~/.mailcap",
    "~/.config/mimeapps.list",
    "~/.local/share/applications/evil.desktop",
    "~/.gdbinit",
    "~/.config/gdb/gdbinit",
    "~/.lldbinit",
    "~/.psqlrc",
    "~/.sqliterc",
    "~/.my.cnf",
]


@pytest.mark.parametrize("path", STARTUP)
def test_start_up_files_are_protected_from_writes(home: Path, path: str) -> None:
    project = home / "work"
    protection = write_protection(path, project)
    assert protection is not None, path
    assert not protection.refused
    verdict = assess(
        "accept-edits",
        WRITE,
        Action(risk="write", summary="w", paths=(Path(os.path.expanduser(path)),)),
        home,
        allow=[Rule.parse("edit"), Rule.parse("write")],
    )
    assert verdict.verdict == "ask", (path, verdict.reason)
    assert not verdict.grantable


@pytest.mark.parametrize(
    "path",
    [
        f"~/{SITE}/requests/__init__.py",
        ".venv/lib/python3.11/site-packages/mypkg/util.py",
        "src/site.py",
        "src/usercustomize_notes.md",
        "docs/x.pth.md",
        "~/.local/share/notes.txt",
        "~/.vim_notes",
        "~/binaries/x",
        "~/.config/Code/User/snippets.txt",
    ],
)
def test_neighbours_of_start_up_files_are_not(home: Path, path: str) -> None:
    assert write_protection(path, home / "work") is None, path


@pytest.mark.parametrize(
    "command",
    [
        "cp evil.pth .venv/lib/python3.11/site-packages/",
        "cp evil.pth .venv/lib/python3.11/site-packages/evil.pth",
        "cp x ~/.local/bin/ls",
        "echo 'registry=https://evil.example' >> ~/.npmrc",
        "tee -a ~/.vimrc",
    ],
)
def test_commands_into_start_up_files_are_protected(home: Path, command: str) -> None:
    project = home / "work"
    (project / ".venv/lib/python3.11/site-packages").mkdir(parents=True)
    assert command_protections(command, project), command
