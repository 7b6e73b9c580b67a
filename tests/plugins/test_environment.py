"""The environment plugin against real git repositories in temporary folders."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from dsh.host import HostFacts
from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.prompt import PromptContext, PromptService
from dsh.services import HOST, PROMPT
from dsh_plugins.environment import FilterCache, filter_overrides, git_summary, parse_status
from dsh_plugins.environment import plugin as environment_plugin
from tests.support.waits import HANG_S

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
    root.provide(HOST, HostFacts.this_machine())
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
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    # git would sleep for ten minutes: the summary says it was given up on.
    summary = await asyncio.wait_for(git_summary(tmp_path, seconds=0.5), HANG_S)
    assert summary == "status unavailable (git took longer than 0.5 s)"
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


@needs_git
async def test_a_hostile_repository_config_runs_nothing(tmp_path: Path) -> None:
    """A repository's own config (a downloaded tarball's .git, say) may name commands
    git runs during a status: an fsmonitor hook, clean filters (with attributes that
    apply them to every file, some through an included file), hooks, a pager, an
    external diff. None of them may run when the environment is described."""
    repo = make_repo(tmp_path / "repo")
    (repo / "third.txt").write_text("three\n")
    git(repo, "add", "third.txt")
    git(repo, "commit", "-q", "-m", "third")
    markers = tmp_path / "markers"
    markers.mkdir()

    def touch(name: str) -> str:
        return f"touch {markers / name}"

    git(repo, "config", "core.fsmonitor", f"{touch('fsmonitor')}; false")
    git(repo, "config", "filter.evil.clean", f"{touch('clean')}; cat")
    git(repo, "config", "filter.evil.process", touch("process"))
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "filter.odd.name.clean", f"{touch('dotted')}; cat")
    (tmp_path / "included").write_text(f'[filter "inc"]\n\tclean = "{touch("included")}; cat"\n')
    git(repo, "config", "include.path", str(tmp_path / "included"))
    git(repo, "config", "core.pager", touch("pager"))
    git(repo, "config", "diff.external", touch("diff"))
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text(
        "* filter=inc\ntracked.txt filter=evil\nother.txt filter=odd.name\n"
    )
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "pre-commit"):
        (hooks / hook).write_text(f"#!/bin/sh\n{touch(hook)}\n")
        (hooks / hook).chmod(0o755)
    # Stat data that no longer matches the index: git must look at the contents again.
    future = time.time() + 5
    for name in ("tracked.txt", "other.txt", "third.txt"):
        os.utime(repo / name, (future, future))
    (repo / "tracked.txt").write_text("uno\n")  # the same size as before

    summary = await git_summary(repo)

    assert sorted(p.name for p in markers.iterdir()) == []
    assert summary == "branch main; 1 modified"


@needs_git
async def test_the_users_own_filters_still_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A filter from the user's global config (git-lfs, say) is theirs: status keeps
    # using it, or every stat-dirty file it cleans would look modified.
    global_config = tmp_path / "gitconfig"
    global_config.write_text('[filter "upper"]\n\tclean = tr a-z A-Z\n\trequired = true\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitattributes").write_text("*.txt filter=upper\n")
    (repo / "a.txt").write_text("lower case\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    future = time.time() + 5
    os.utime(repo / "a.txt", (future, future))
    assert await git_summary(repo) == "branch main; clean"


def test_filter_overrides_switch_off_only_the_repositorys_drivers() -> None:
    listed = b"global\0filter.lfs.clean\0local\0filter.evil.clean\0local\0filter.a.b.process\0"
    assert filter_overrides(listed, scoped=True) == [
        *("-c", "filter.evil.clean=", "-c", "filter.evil.smudge="),
        *("-c", "filter.evil.process=", "-c", "filter.evil.required=false"),
        *("-c", "filter.a.b.clean=", "-c", "filter.a.b.smudge="),
        *("-c", "filter.a.b.process=", "-c", "filter.a.b.required=false"),
    ]
    # A git without --show-scope: every driver is switched off.
    unscoped = filter_overrides(b"filter.lfs.clean\0filter.lfs.process\0", scoped=False)
    assert unscoped is not None
    assert unscoped[1::2] == [
        "filter.lfs.clean=",
        "filter.lfs.smudge=",
        "filter.lfs.process=",
        "filter.lfs.required=false",
    ]
    # `-c name=value` cuts at the first "=": such a name cannot be switched off.
    assert filter_overrides(b"worktree\0filter.a=b.clean\0", scoped=True) is None
    assert filter_overrides(b"", scoped=True) == []


def git_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a ``git`` first on PATH that notes each run's command, then runs git."""
    real = shutil.which("git")
    assert real is not None
    folder = tmp_path / "counting"
    folder.mkdir()
    runs = tmp_path / "git-runs"
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\nfor a; do :; done\necho "$a" >> {runs}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return runs


def stat_dirty(repo: Path) -> None:
    """Stat data that no longer matches the index: git must read (and clean) the files."""
    future = time.time() + 5
    for name in ("tracked.txt", "other.txt"):
        os.utime(repo / name, (future, future))


def same_size_edit(config: Path, text: str) -> None:
    """Replace ``config``'s padding line with ``text``, the file's size and
    modification time kept: only its change time says it changed."""
    before = config.stat()
    old = config.read_text()
    start = old.index("[pad]")
    tail = old[start:]
    assert len(text) < len(tail)
    config.write_text(old[:start] + text + "#" * (len(tail) - len(text) - 1) + "\n")
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert config.stat().st_size == before.st_size


@needs_git
@pytest.mark.parametrize("how", ["git config", "same size and time", "an included file"])
async def test_a_filter_configured_between_turns_is_switched_off_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The filter listing is kept from one turn to the next while no config file
    changed: a filter driver the repository's config gains in between (the model's
    last command, a script the person ran) must be found and switched off all the
    same, however the file was changed."""
    runs = git_counter(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    markers = tmp_path / "markers"
    markers.mkdir()
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    config = repo / ".git" / "config"
    included = tmp_path / "included"
    included.write_text("[core]\n\tquotePath = true\n")
    if how == "an included file":
        git(repo, "config", "include.path", str(included))
    else:
        config.write_text(config.read_text() + "[pad]\n\tx = " + "a" * 120 + "\n")
    cache = FilterCache()
    stat_dirty(repo)
    assert await git_summary(repo, cache=cache) == "branch main; clean"

    evil = f'[filter "evil"]\n\tclean = "touch {markers / "clean"}; cat"\n'
    if how == "git config":
        git(repo, "config", "filter.evil.clean", f"touch {markers / 'clean'}; cat")
    elif how == "same size and time":
        same_size_edit(config, evil)
    else:
        included.write_text(evil)
    stat_dirty(repo)
    runs.write_text("")

    assert await git_summary(repo, cache=cache) == "branch main; clean"
    assert list(markers.iterdir()) == []
    assert runs.read_text().split() == [
        "^(filter|include|includeif)\\.",
        "--ignore-submodules=dirty",
    ]


@needs_git
async def test_the_filter_listing_is_kept_while_no_config_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn's git status is one git run, not two, when nothing git reads its
    config from changed since the last; the listing is made again when one did."""
    runs = git_counter(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    (repo / "tracked.txt").write_text("changed\n")
    cache = FilterCache()

    async def git_runs() -> int:
        runs.write_text("")
        assert await git_summary(repo, cache=cache) == "branch main; 1 modified"
        return len(runs.read_text().split())

    assert await git_runs() == 2  # listed, then the status
    git(repo, "status")  # the person's own git: the index and locks change, no config
    assert await git_runs() == 1
    git(repo, "config", "user.name", "Someone Else")
    assert await git_runs() == 2
    assert await git_runs() == 1
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.quotepath'='false'")
    assert await git_runs() == 2
