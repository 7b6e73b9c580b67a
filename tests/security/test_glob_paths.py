"""Protected and denied paths spelled as globs, and read around by recursion.

The attacks of issue 35 (classes 4 and 5), end to end through ``dsh -p`` against the
scripted server, each checking the side effect on disk or in what the model and the
session log received:

- with ``bash(cp:*)`` allowed, ``cp evil.cfg .gi?/config``, ``cp -p pre-commit
  .gi[t]/hooks/`` and ``.gi{t,}`` brace spellings plant nothing, and the next allowed
  ``git status`` runs nothing; the home folder's start-up files and secret stores
  spelled as globs (``~/.bas?rc``, ``$HOME/.ss*/``, ``~/.aw?/``) likewise;
- with ``deny = ["read(.env)"]`` and ``cat``/``grep``/``rg`` allowed, ``cat .en?``,
  ``cat .e*``, ``grep -r SECRET .``, ``rg SECRET`` and the other recursive readers
  never return the secret, nor do the never-asked ``grep`` and ``glob`` tools;
- the legitimate uses (``cp a.txt src/``, ``cat *.txt``, ``grep -r TODO src/``) still
  run unasked.

Then the decisions themselves, spelling by spelling, through
:func:`~dsh.policy.permissions.assess`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.policy.permissions import Rule, assess
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import Action, ToolDefinition
from dsh_plugins.fs.ripgrep import find_rg
from tests.e2e.harness import SETTINGS, Dsh
from tests.security.planted import FSMONITOR, HOOK, git_init, needs_git

SECRET = "SECRET=dotenv-canary-93c1f0"
NOT_RUN = "was not run: no one is here to approve it"


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    """An installation whose child runs with a home folder of the test's own."""
    dsh.home_of_its_own()
    return dsh


def rules(dsh: Dsh, allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> None:
    def listed(values: tuple[str, ...]) -> str:
        return ", ".join(f'"{value}"' for value in values)

    (dsh.home / "settings.toml").write_text(
        f"{SETTINGS}\n[permissions]\nallow = [{listed(allow)}]\ndeny = [{listed(deny)}]\n"
    )


def calls(*commands: str, tool: str = "bash", **more: Any) -> Reply:
    """One step making every call at once (``commands`` for bash)."""
    specs = [
        ToolCallSpec(name=tool, arguments={"command": c, "description": "do it", **more})
        for c in commands
    ]
    return Reply(tool_calls=specs)


def tool_texts(server: FakeLLM) -> list[str]:
    body = server.chat_requests[-1].body
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def logged(dsh: Dsh, secret: str) -> list[Path]:
    """The files under ``$DSH_HOME`` holding ``secret``."""
    return [
        path
        for path in dsh.home.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    ]


# ---------------------------------------------------------------------- class 4


@needs_git
async def test_a_glob_spelling_of_git_files_plants_no_fsmonitor_nor_hook(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    project = dsh.project
    git_init(project)
    config = project / ".git" / "config"
    before = config.read_text()
    (project / "evil.cfg").write_text(before + FSMONITOR)
    (project / "pre-commit").write_text(HOOK)
    (project / "pre-commit").chmod(0o755)
    hooks = sorted(p.name for p in (project / ".git" / "hooks").iterdir())
    rules(dsh, allow=("bash(cp:*)", "bash(git status:*)"))
    attacks = (
        "cp evil.cfg .gi?/config",
        "cp -p pre-commit .gi[t]/hooks/",
        "cp evil.cfg .gi{t,x}/config",
        "cp evil.cfg ./.g*/config",
        "cp -p pre-commit .git/hook?/pre-commit",
        "cp -p pre-commit .[g]it/*/",
    )
    fake_llm.add(calls(*attacks), calls("git status --short"), Reply(text="Done."))

    done = await dsh.run("-p", "speed up git", "--permission-mode", "default")

    assert done.code == 0, done.stderr
    assert config.read_text() == before
    assert sorted(p.name for p in (project / ".git" / "hooks").iterdir()) == hooks
    assert not (project / "PWNED").exists(), "git ran the planted fsmonitor command"
    texts = tool_texts(fake_llm)
    for command, text in zip(attacks, texts, strict=False):
        assert NOT_RUN in text, (command, text)
        assert "git run programs" in text, (command, text)


async def test_home_start_up_files_and_stores_spelled_as_globs_are_asked(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    home = dsh.root / "userhome"
    (home / ".bashrc").write_text("# mine\n")
    (home / ".ssh").mkdir()
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = aws-canary-77e1\n")
    (dsh.project / "evil.sh").write_text("touch PWNED\n")
    rules(dsh, allow=("bash(cp:*)", "bash(cat:*)"))
    attacks = (
        "cp evil.sh ~/.bas?rc",
        "cp evil.sh $HOME/.ss*/authorized_keys",
        "cp evil.sh ~/../userhome/.bash{rc,_profile}",
        "cat ~/.aw?/credentials",
        "cat ${HOME}/.a*/*",
    )
    fake_llm.add(calls(*attacks), Reply(text="Done."))

    done = await dsh.run("-p", "tidy up", "--permission-mode", "default")

    assert done.code == 0, done.stderr
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert not (home / ".bash_profile").exists()
    assert not (home / ".ssh" / "authorized_keys").exists()
    texts = tool_texts(fake_llm)
    for command, text in zip(attacks, texts, strict=True):
        assert NOT_RUN in text, (command, text)
    assert "aws-canary-77e1" not in "".join(texts)
    assert not logged(dsh, "aws-canary-77e1")


# ---------------------------------------------------------------------- class 5


def dotenv_project(dsh: Dsh) -> None:
    project = dsh.project
    (project / ".env").write_text(f"{SECRET}\n")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("# TODO: SECRET handling\n")
    (project / "notes.txt").write_text("TODO notes\n")
    (project / "private").mkdir()
    (project / "private" / "keys.txt").write_text("KEY=private-canary-5512\n")


READ_AROUND = (
    "cat .en?",
    "cat .e*",
    "cat ./.[e]nv",
    "cat .{env,x}",
    "grep -r SECRET .",
    "grep -R SECRET",
    "grep --recursive -n SECRET ./",
    "shopt -s dotglob; cat *",
    "find . -name '.e*' -exec cat {} +",
    "find . -type f -print0 | xargs -0 cat",
    "tar cf - . | cat",
    "head -n 5 .??v",
)


async def test_a_read_deny_rule_is_not_read_around_by_globs_or_recursion(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    dotenv_project(dsh)
    rules(
        dsh,
        allow=(
            "bash(cat:*)",
            "bash(grep:*)",
            "bash(head:*)",
            "bash(find:*)",
            "bash(xargs:*)",
            "bash(tar:*)",
            "bash(shopt:*)",
        ),
        deny=("read(.env)",),
    )
    fake_llm.add(calls(*READ_AROUND), Reply(text="Done."))

    done = await dsh.run("-p", "find the secret", "--permission-mode", "default")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert len(texts) == len(READ_AROUND)
    for command, text in zip(READ_AROUND, texts, strict=True):
        assert "dotenv-canary" not in text, (command, text)
        assert text.startswith("Error: "), (command, text)
    assert not logged(dsh, "dotenv-canary")


async def test_ripgrep_through_bash_does_not_read_a_denied_file_even_in_bypass(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    dotenv_project(dsh)
    rules(dsh, deny=("read(.env)",))
    rg = find_rg()  # the one the fs plugin runs: on PATH, or beside this Python
    attacks = (f"{rg} --hidden SECRET", f"{rg} -uu SECRET .", f"{rg} --hidden -e SECRET ./")
    fake_llm.add(calls(*attacks), Reply(text="Done."))

    done = await dsh.run("-p", "find the secret", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    for command, text in zip(attacks, texts, strict=True):
        assert "dotenv-canary" not in text, (command, text)
        assert text.startswith("Error: "), (command, text)
    assert not logged(dsh, "dotenv-canary")


async def test_the_search_tools_leave_a_denied_file_out(dsh: Dsh, fake_llm: FakeLLM) -> None:
    dotenv_project(dsh)
    rules(dsh, deny=("read(.env)", "read(private/**)"))
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="grep", arguments={"pattern": "SECRET", "path": "."}),
                ToolCallSpec(name="grep", arguments={"pattern": "SECRET", "include": "*"}),
                ToolCallSpec(name="glob", arguments={"pattern": ".e*"}),
                ToolCallSpec(name="glob", arguments={"pattern": "**/*"}),
            ]
        ),
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "find the secret", "--permission-mode", "default")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert "src/app.py" in texts[0]  # the search ran, and found the rest
    for text in texts:
        assert "dotenv-canary" not in text, text
        assert "private-canary" not in text, text
        assert ".env" not in text.split("\n\n")[0], text
        assert "private/" not in text.split("\n\n")[0], text
    assert not logged(dsh, "dotenv-canary")
    assert not logged(dsh, "private-canary")


# ---------------------------------------------------------------------- controls


@needs_git
async def test_ordinary_globs_and_recursion_still_run_unasked(dsh: Dsh, fake_llm: FakeLLM) -> None:
    dotenv_project(dsh)
    git_init(dsh.project)
    (dsh.project / "a.txt").write_text("alpha\n")
    rules(
        dsh,
        allow=("bash(cp:*)", "bash(cat:*)", "bash(grep:*)", "bash(ls:*)"),
        deny=("read(.env)",),
    )
    controls = ("cp a.txt src/", "cat *.txt", "grep -r TODO src/", "ls *", "cat src/*.py")
    fake_llm.add(calls(*controls), Reply(text="Done."))

    done = await dsh.run("-p", "work", "--permission-mode", "default")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    for command, text in zip(controls, texts, strict=True):
        assert not text.startswith("Error"), (command, text)
    assert (dsh.project / "src" / "a.txt").read_text() == "alpha\n"
    assert "alpha" in texts[1]
    assert "TODO notes" in texts[1]
    assert "TODO: SECRET handling" in texts[2]
    assert "dotenv-canary" not in "".join(texts)


# ---------------------------------------------------------------------- decisions


class _Args(BaseModel):
    pass


async def _nothing(args: _Args, context: object) -> str:
    return ""


BASH = ToolDefinition(name="bash", description="", arguments=_Args, execute=_nothing)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DSH_HOME", str(home / ".dsh"))
    project = home / "work" / "project"
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "secrets").mkdir()
    (project / ".env").write_text(f"{SECRET}\n")
    (project / "a.txt").write_text("")
    return project


def verdict(command: str, cwd: Path, *, mode: str = "default", rules: bool = True) -> str:
    """The verdict under allow rules for the usual readers and writers, and (with
    ``rules``) deny rules for ``.env`` and ``secrets/``."""
    allow = [Rule.parse(f"bash({p}:*)") for p in ("cp", "cat", "grep", "rg", "ls", "tar")]
    deny = [Rule.parse("read(.env)"), Rule.parse("read(secrets/**)")] if rules else []
    action = Action(risk="exec", summary=command, command=command)
    decided = assess(mode, BASH, action, cwd, allow=allow, deny=deny)  # type: ignore[arg-type]
    return decided.verdict


@pytest.mark.parametrize(
    "command",
    [
        "cp x .gi?/config",
        "cp x .gi[t]/hooks/",
        "cp x .gi{t,}/config",
        "cp x '.gi'?/config",
        "cp x .g*/info/x",
        "cp x */.git/config",
        "cp x .ds?/settings.toml",
        "cp x .[d]sh/settings.toml",
        "cp x ~/.bas?rc",
        "cp x $HOME/.ss*/",
        "cp x ~/.config/*/config",
        "cp x .gi@(t|x)/config",
        "cat ~/.aw?/credentials",
        "shopt -s dotglob; cp x */config",
        "cp x ../*/.git/hooks/pre-commit",
    ],
)
def test_a_glob_that_could_name_a_protected_path_asks(project: Path, command: str) -> None:
    assert verdict(command, project, rules=False) == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "cat .en?",
        "cat .e*",
        "cat secrets/*",
        "cat secre?s/x",
        "grep -r x .",
        "grep -rl x",
        "rg x",
        "rg x secrets",
        "cp -r . /tmp/copy",
        "tar czf /tmp/all.tgz .",
    ],
)
def test_a_word_that_could_read_a_denied_path_is_never_allowed(project: Path, command: str) -> None:
    assert verdict(command, project) in ("ask", "deny")
    assert verdict(command, project, mode="bypass") in ("ask", "deny")


@pytest.mark.parametrize(
    "command",
    [
        "cp a.txt src/",
        "cat *.txt",
        "grep -r TODO src/",
        "rg TODO src",
        "ls *.txt",
        "cat src/*",
        "cp x src/*.py",
        "grep TODO *.txt",
        "cat ~/notes/*.md",
    ],
)
def test_ordinary_globs_and_recursion_are_allowed(project: Path, command: str) -> None:
    assert verdict(command, project) == "allow"
