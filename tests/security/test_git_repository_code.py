"""An allowed git command runs no program a repository's files name (issue 35, class 1).

The attacks, end to end through ``dsh -p`` against the scripted server: a project that
ships a bare-shaped folder (``evil/HEAD``, ``evil/config`` naming ``core.fsmonitor``
and a filter, ``evil/objects``, ``evil/refs``) and a nested repository as a tarball
would bring it (``nested/.git/config``), and allow rules for ``git status``; a project
whose own ``.git/config`` came with it (hooks, pager, editor, ssh command, credential
helper); a project whose config names programs under names of its choosing (an
external diff, an alias, a filter driver). No planted program may run: every marker
a planted program would make is looked for on disk. The controls: git in a clean
project still runs unasked under its rules, and the user's own global ssh command and
credential helper still apply.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh.policy.git_config import config_programs, git_environment_overrides, safe_git_settings
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import SETTINGS, Dsh

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ASKED = "was not run: no one is here to approve it"


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    """An installation whose child runs with a home folder (and global git config) of
    the test's own, and an editor that does nothing."""
    home = dsh.home_of_its_own()
    (home / ".gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.com\n")
    dsh.environment.update(
        XDG_CONFIG_HOME=str(home / ".config"), EDITOR="true", VISUAL="true", GIT_TERMINAL_PROMPT="0"
    )
    return dsh


def user_home(dsh: Dsh) -> Path:
    return dsh.root / "userhome"


def bash(command: str, call_id: str, **extra: Any) -> ToolCallSpec:
    arguments = {"command": command, "description": "git", **extra}
    return ToolCallSpec(name="bash", arguments=arguments, id=call_id)


def allow(dsh: Dsh, *rules: str) -> None:
    listed = ", ".join(f'"{rule}"' for rule in rules)
    (dsh.home / "settings.toml").write_text(f"{SETTINGS}\n[permissions]\nallow = [{listed}]\n")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout


def repository(project: Path) -> None:
    git(project, "init", "-q")
    (project / "f.txt").write_text("one\n")
    git(project, "add", "f.txt")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")


def planted(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("PWNED*"))


async def run_calls(dsh: Dsh, fake_llm: FakeLLM, calls: list[ToolCallSpec]) -> dict[str, str]:
    fake_llm.add(Reply(tool_calls=calls), Reply(text="Done."))
    done = await dsh.run("-p", "look at the repository")
    assert done.code == 0, done.stderr
    body = fake_llm.chat_requests[-1].body
    return {m["tool_call_id"]: str(m["content"]) for m in body["messages"] if m["role"] == "tool"}


# ---------------------------------------------------------------------- attacks


async def test_a_bare_shaped_folder_or_nested_repository_runs_nothing_under_git_status(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    project = dsh.project
    repository(project)
    marker = project / "PWNED"
    evil = project / "evil"
    for folder in ("objects", "refs"):
        (evil / folder).mkdir(parents=True)
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text(
        "[core]\n\tbare = false\n\tworktree = ..\n"
        f'\tfsmonitor = "touch {marker}-fsmonitor-bare; false"\n'
        f'[filter "x"]\n\tclean = "touch {marker}-filter-bare; cat"\n'
    )
    (project / ".gitattributes").write_text("f.txt filter=x\n")
    nested = project / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    with (nested / ".git" / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {marker}-fsmonitor-nested; false"\n')
    (nested / "n.txt").write_text("n\n")
    allow(dsh, "bash(git status:*)", "bash(cd:*)")
    attacks = [
        bash("git -C evil status", "bare_C"),
        bash("git --git-dir=evil --work-tree=. status", "bare_git_dir"),
        bash("git status", "bare_workdir", workdir="evil"),
        bash("cd evil && git status", "bare_cd"),
        bash("git --bare status", "bare_flag", workdir="evil"),
        bash("git -C nested status", "nested_C"),
        bash("git status", "nested_workdir", workdir="nested"),
        bash("cd nested && git status", "nested_cd"),
        ToolCallSpec(
            name="terminal_open",
            arguments={"command": "git status", "cwd": "nested"},
            id="nested_terminal",
        ),
    ]
    control = bash("git status", "control")

    results = await run_calls(dsh, fake_llm, [*attacks, control])

    assert planted(dsh.root) == [], "git ran a program the repository's files name"
    for call in ("bare_C", "bare_git_dir", "bare_cd"):
        assert ASKED in results[call], (call, results[call])
        # Named, the folder is git's own data (protected); else git's options are asked.
        assert "names evil: a folder git takes for a repository" in results[call], results[call]
    assert "no rule can allow it unasked: git -C" in results["nested_C"], results["nested_C"]
    assert "no rule can allow it unasked: git --bare" in results["bare_flag"], results["bare_flag"]
    assert "cannot use bare repository" in results["bare_workdir"], results["bare_workdir"]
    for call in ("nested_workdir", "nested_cd"):
        assert "No commits yet" in results[call], results[call]  # ran, harmlessly
    assert "On branch" in results["control"], results["control"]


async def test_a_projects_own_config_runs_none_of_its_programs_and_the_users_still_run(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """A project whose .git/config came with it (a tarball with its .git) names hooks,
    fsmonitor, a pager, editors, an ssh command and a credential helper: commands under
    allow rules run, none of those does; the user's global ssh command and credential
    helper (from ~/.gitconfig) are the ones git uses."""
    project = dsh.project
    repository(project)
    marker = project / "PWNED"
    hooks = project / "githooks"
    hooks.mkdir()
    for hook in ("pre-commit", "commit-msg", "post-commit", "post-checkout", "post-rewrite"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}-hook-{hook}\n")
        (hooks / hook).chmod(0o755)
    with (project / ".git" / "config").open("a") as config:
        config.write(
            "[core]\n\thooksPath = githooks\n"
            f'\tfsmonitor = "touch {marker}-fsmonitor; false"\n'
            f'\tpager = "touch {marker}-pager; cat"\n'
            f'\teditor = "touch {marker}-editor; true"\n'
            f'\tsshCommand = "touch {marker}-ssh; false"\n'
            f'[sequence]\n\teditor = "touch {marker}-sequence-editor; true"\n'
            f'[credential]\n\thelper = "!touch {marker}-credential; true"\n'
        )
    # They leave their marks in the project: the sandbox keeps the home read-only.
    used = project
    with (user_home(dsh) / ".gitconfig").open("a") as config:
        config.write(
            f'[core]\n\tsshCommand = "touch {used}/ssh-used; false"\n'
            f'[credential]\n\thelper = "!touch {used}/credential-used"\n'
        )
    allow(
        dsh,
        "bash(git status:*)",
        "bash(git log:*)",
        "bash(git diff:*)",
        "bash(git commit:*)",
        "bash(git rebase:*)",
        "bash(git ls-remote:*)",
        "bash(git credential:*)",
        "bash(printf:*)",
    )
    (project / "f.txt").write_text("two\n")
    calls = [
        bash("git status", "status"),
        bash("git diff", "diff"),
        bash("git commit -am second", "commit"),
        bash("git log --oneline", "log"),
        bash("git commit --amend --no-edit", "amend"),
        bash("git rebase -i HEAD~1", "rebase"),
        bash("git ls-remote ssh://git@127.0.0.1:9/nothing.git", "ssh"),
        bash(
            "printf 'protocol=https\\nhost=127.0.0.1\\nusername=u\\n\\n' | git credential fill",
            "credential",
        ),
        ToolCallSpec(name="terminal_open", arguments={"command": "git -p log -1"}, id="pager"),
    ]

    results = await run_calls(dsh, fake_llm, calls)

    assert planted(dsh.root) == [], "git ran a program the project's config names"
    for call in ("status", "diff", "commit", "log", "amend", "rebase", "ssh", "credential"):
        assert ASKED not in results[call], (call, results[call])
    for call in ("status", "diff", "commit", "log", "amend", "rebase"):
        assert not results[call].startswith("Error"), (call, results[call])
    assert "+two" in results["diff"]
    assert "second" in results["log"]
    assert "second" in git(project, "log", "--format=%s", "-1")  # the commit was made
    assert (used / "ssh-used").exists(), results["ssh"]  # the user's own ssh command
    assert (used / "credential-used").exists(), results["credential"]


async def test_git_in_a_repository_naming_drivers_or_aliases_is_asked(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """Settings named by the repository (an external diff, an alias, a filter driver)
    cannot be overridden by name: git there is asked, whatever the rules."""
    project = dsh.project
    repository(project)
    marker = project / "PWNED"
    with (project / ".git" / "config").open("a") as config:
        config.write(
            f'[diff]\n\texternal = "touch {marker}-diff-external; true"\n'
            f'[alias]\n\tst = "!touch {marker}-alias"\n'
            f'[filter "x"]\n\tclean = "touch {marker}-filter; cat"\n'
        )
    (project / ".gitattributes").write_text("f.txt filter=x\n")
    (project / "f.txt").write_text("two\n")
    allow(dsh, "bash(git diff:*)", "bash(git st:*)", "bash(git status:*)", "bash(ls:*)")
    calls = [
        bash("git diff", "diff"),
        bash("git st", "alias"),
        bash("git status", "status"),
        bash("ls", "control"),
    ]

    results = await run_calls(dsh, fake_llm, calls)

    assert planted(dsh.root) == []
    for call in ("diff", "alias", "status"):
        assert ASKED in results[call], (call, results[call])
        assert (
            "the repository's config names a program for git to run: diff.external"
            in (results[call])
        )
    assert "f.txt" in results["control"]


# ------------------------------------------------------------- the settings alone


def test_the_users_own_values_win_over_neutral_ones_and_exports_are_kept() -> None:
    own = {
        "core.sshcommand": ("ssh -i ~/.ssh/mine",),
        "credential.helper": ("cache", "store"),
    }
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "color.ui", "GIT_CONFIG_VALUE_0": "never"}
    pairs = safe_git_settings(env, own)
    assert ("safe.bareRepository", "explicit") in pairs
    assert ("core.fsmonitor", "false") in pairs
    assert ("core.sshCommand", "ssh -i ~/.ssh/mine") in pairs
    helpers = [value for key, value in pairs if key == "credential.helper"]
    assert helpers == ["", "cache", "store"]  # the repository's list cleared first
    found = git_environment_overrides(env, own)
    count = int(found["GIT_CONFIG_COUNT"])
    assert (found[f"GIT_CONFIG_KEY_{count - 1}"], found[f"GIT_CONFIG_VALUE_{count - 1}"]) == (
        "color.ui",
        "never",
    )


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('[diff]\n\texternal = "x"\n', "diff.external"),
        ('[diff "pdf"]\n\ttextconv = x\n', "diff.pdf.textconv"),
        ('[filter "lfs"]\n  smudge = x\n', "filter.lfs.smudge"),
        ("[alias]\n\tst = status\n", "alias.st"),
        ('[include]\n\tpath = "../evil.cfg"\n', "include.path"),
        ('[remote "o"]\n\tuploadpack = x\n', "remote.o.uploadpack"),
        ("[core]\n\tgitProxy = x\n", "core.gitProxy"),
        ("[core] fsmonitor = x\n[user]\n\tname = a\n", None),
        ('[diff]\n\trenames = true\n[merge "ours"]\n\tname = keep\n', None),
    ],
)
def test_settings_under_names_a_repository_chooses_are_found(text: str, found: str | None) -> None:
    assert config_programs(text) == found


async def test_git_is_judged_in_the_repository_it_will_read_after_a_cd(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """A nested repository's alias, reached by ``cd`` in the command, by the bash tool's
    ``workdir``, or by a ``cd`` typed earlier into a terminal: asked. The user's own
    alias of the same name in the project itself still runs unasked."""
    project = dsh.project
    repository(project)
    with (user_home(dsh) / ".gitconfig").open("a") as config:
        config.write("[alias]\n\tst = status --short --branch\n")
    nested = project / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    with (nested / ".git" / "config").open("a") as config:
        config.write(f'[alias]\n\tst = "!touch {project}/PWNED-alias-nested"\n')
    allow(dsh, "bash(git st:*)", "bash(cd:*)", "terminal_open(shell)")
    fake_llm.add(
        Reply(
            tool_calls=[
                bash("cd nested && git st", "cd"),
                bash("git st", "workdir", workdir="nested"),
                bash("cd nested; cd ..; git st", "back"),
                bash("git st", "control"),
                ToolCallSpec(name="terminal_open", arguments={}, id="open"),
            ]
        ),
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="terminal_send",
                    arguments={"terminal_id": "t1", "text": "cd nested\n"},
                    id="terminal_cd",
                )
            ]
        ),
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="terminal_send",
                    arguments={"terminal_id": "t1", "text": "git st\n"},
                    id="terminal_git",
                )
            ]
        ),
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "look at the nested repository")

    assert done.code == 0, done.stderr
    assert planted(dsh.root) == [], "git ran the nested repository's alias"
    results = {
        m["tool_call_id"]: str(m["content"])
        for m in fake_llm.chat_requests[-1].body["messages"]
        if m["role"] == "tool"
    }
    for call in ("cd", "workdir", "back", "terminal_git"):
        assert ASKED in results[call], (call, results[call])
        assert "names a program for git to run: alias.st" in results[call], results[call]
    assert "## " in results["control"], results["control"]  # the user's alias ran
    assert not results["terminal_cd"].startswith("Error"), results["terminal_cd"]


async def test_accept_edits_cannot_make_a_folder_a_repository_or_change_one(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """In accept-edits, the model plants a repository for the user's own git to obey
    later: a config naming core.fsmonitor beside objects/ and refs/, then the HEAD that
    makes the folder a repository (by the write tool, a redirection, a copy), and a
    hook and config in a bare-shaped folder already there. Every step that would make or
    change a repository is asked; ordinary files beside them are written."""
    project = dsh.project
    marker = project / "PWNED"
    trap = project / "trap"
    for folder in ("objects", "refs"):
        (trap / folder).mkdir(parents=True)
    evil = project / "evil"
    for folder in ("objects", "refs", "hooks"):
        (evil / folder).mkdir(parents=True)
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text("[core]\n\tbare = true\n")
    (project / "head.txt").write_text("ref: refs/heads/main\n")
    fsmonitor = f'[core]\n\tbare = false\n\tfsmonitor = "touch {marker}-fsmonitor; false"\n'
    allow(dsh, "bash(printf:*)", "bash(cp:*)")

    def write(path: str, content: str, call_id: str) -> ToolCallSpec:
        arguments = {"file_path": path, "content": content}
        return ToolCallSpec(name="write", arguments=arguments, id=call_id)

    read = ToolCallSpec(name="read", arguments={"file_path": "evil/config"}, id="read")
    fake_llm.add(
        Reply(tool_calls=[read]),
        Reply(
            tool_calls=[
                write("trap/config", fsmonitor, "config"),
                write("trap/HEAD", "ref: refs/heads/main\n", "head"),
                bash("printf 'ref: refs/heads/main\\n' > trap/HEAD", "redirect"),
                bash("cp head.txt trap/HEAD", "copy"),
                write("evil/config", fsmonitor, "evil_config"),
                write("evil/hooks/pre-commit", f"#!/bin/sh\ntouch {marker}-hook\n", "hook"),
                write("trap/notes.txt", "fine\n", "control"),
                bash("cp head.txt HEADLINE.txt", "control_copy"),
            ]
        ),
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "set up a mirror", "--permission-mode", "accept-edits")

    assert done.code == 0, done.stderr
    body = fake_llm.chat_requests[-1].body
    results = {
        m["tool_call_id"]: str(m["content"]) for m in body["messages"] if m["role"] == "tool"
    }
    assert not (trap / "HEAD").exists()
    assert (evil / "config").read_text() == "[core]\n\tbare = true\n"
    assert not (evil / "hooks" / "pre-commit").exists()
    for call in ("head", "redirect", "copy"):
        assert "this file can make a folder a git repository" in results[call], results[call]
    for call in ("evil_config", "hook"):
        assert "a folder git takes for a repository" in results[call], results[call]
    assert (trap / "notes.txt").read_text() == "fine\n"  # accept-edits still writes
    assert (project / "HEADLINE.txt").exists()
    # The user's own git, later, without dsh's settings: nothing planted to obey.
    users_git(project, "--git-dir=trap", "--work-tree=.", "status")
    users_git(project, "--git-dir=evil", "--work-tree=.", "status")
    assert planted(dsh.root) == []


def users_git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60, check=False)
