"""The environment plugin against real git repositories in temporary folders."""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.prompt import PROMPT, PromptContext, PromptService
from plugins.environment import git_summary, parse_status
from plugins.environment import plugin as environment_plugin

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the user's git config and any repository above tmp_path out of the tests."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.com")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "tracked.txt").write_text("one\n")
    (path / "other.txt").write_text("two\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    return path


async def load(cwd: Path) -> tuple[Context, PromptContext]:
    root = Context()
    root.provide(PROMPT, PromptService(root))
    [record] = await PluginHost(root).load(
        [Candidate("environment", "test", plugin=environment_plugin)]
    )
    assert record.status is PluginStatus.LOADED, record.error
    return root, PromptContext(agent=None, scope=None, cwd=cwd, provider="p", model="m")


@needs_git
async def test_a_repository_with_changes_on_a_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = make_repo(tmp_path / "origin")
    git(tmp_path, "clone", "-q", str(origin), "work")
    work = tmp_path / "work"
    git(work, "switch", "-q", "-c", "feature", "--track", "origin/main")
    (work / "new.txt").write_text("committed on the branch\n")
    git(work, "add", "new.txt")
    git(work, "commit", "-q", "-m", "ahead")
    (origin / "tracked.txt").write_text("upstream moved\n")
    git(origin, "commit", "-q", "-am", "upstream")
    git(work, "fetch", "-q")

    (work / "staged.txt").write_text("staged\n")
    git(work, "add", "staged.txt")
    (work / "tracked.txt").write_text("modified\n")
    (work / "other.txt").write_text("staged, then modified again\n")
    git(work, "add", "other.txt")
    (work / "other.txt").write_text("and again\n")
    (work / "untracked.txt").write_text("new\n")

    monkeypatch.setenv("SHELL", "/bin/zsh")
    root, pc = await load(work)
    assembly = await root.get(PROMPT).assemble(pc)

    assert assembly.system == (
        "Environment:\n"
        f"- Working directory: {work}\n"
        f"- Platform: {platform.system()} {platform.release()}\n"
        "- Shell: /bin/zsh"
    )
    [(name, form, text)] = assembly.context
    assert (name, form) == ("environment", "snapshot")
    today = datetime.date.today().isoformat()
    assert text == (
        f"Today's date: {today}\n"
        "Git: branch feature (upstream origin/main: ahead 1, behind 1); "
        "2 staged, 2 modified, 1 untracked"
    )


@needs_git
async def test_a_clean_repository_and_a_detached_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert await git_summary(repo) == "branch main; clean"

    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "--detach", "HEAD")
    assert await git_summary(repo) == f"detached HEAD at {sha[:7]}; clean"


@needs_git
async def test_a_repository_without_commits_and_a_subfolder(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    (repo / "sub").mkdir()
    (repo / "sub" / "a.txt").write_text("a")
    assert await git_summary(repo / "sub") == "branch trunk; 1 untracked"


@needs_git
async def test_outside_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHELL", raising=False)
    plain = tmp_path / "plain"
    plain.mkdir()
    root, pc = await load(plain)
    assembly = await root.get(PROMPT).assemble(pc)
    assert assembly.system.endswith("- Shell: unknown")
    [(_, _, text)] = assembly.context
    assert text.endswith("\nGit: not a git repository")


async def test_git_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert await git_summary(tmp_path) == "git is not installed"


async def test_git_that_hangs_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    pid_file = tmp_path / "pid"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    started = time.monotonic()
    assert await git_summary(tmp_path, seconds=0.5) == (
        "status unavailable (git took longer than 0.5 s)"
    )
    assert time.monotonic() - started < 5
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


async def test_git_failing_otherwise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\necho 'fatal: something odd' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert await git_summary(tmp_path) == "status unavailable (fatal: something odd)"


async def test_a_missing_working_directory(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    summary = await git_summary(tmp_path / "gone")
    assert summary.startswith("status unavailable (")


def test_parse_status_counts_renames_and_conflicts() -> None:
    output = "\n".join(
        [
            "# branch.oid 0123456789abcdef",
            "# branch.head main",
            "1 M. N... 100644 100644 100644 aaa bbb staged.py",
            "1 .M N... 100644 100644 100644 aaa bbb modified.py",
            "2 R. N... 100644 100644 100644 aaa bbb R100 new.py\told.py",
            "u UU N... 100644 100644 100644 100644 aaa bbb ccc both.py",
            "? untracked.py",
            "! ignored.py",
        ]
    )
    assert parse_status(output).describe() == (
        "branch main; 2 staged, 1 modified, 1 untracked, 1 conflicted"
    )
