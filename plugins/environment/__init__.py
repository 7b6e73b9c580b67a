"""The environment the agent works in.

A system-prompt section holds what stays put for a session (working directory,
platform, shell), so the cacheable prompt does not change; a context entry holds what
moves (today's date and the git status), which the loop re-enters only when it changes.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import stat
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

from dsh.host import HostFacts
from dsh.kernel import Context, Plugin
from dsh.processes import helper_command
from dsh.prompt import PromptContext, Render, per_workspace
from dsh.services import HOST, PROMPT
from dsh.tools import with_safe_git

GIT_TIMEOUT = 2.0
"""Seconds git may take before the status is reported as unavailable."""

SECTION = """\
Environment:
- Working directory: {{cwd}}
- Platform: {{platform}}
- Shell: {{shell}}"""


@dataclass
class GitStatus:
    """What ``git status --porcelain=v2 --branch`` says, counted."""

    branch: str | None = None
    detached_at: str | None = None
    upstream: str | None = None
    ahead: int = 0
    behind: int = 0
    staged: int = 0
    modified: int = 0
    untracked: int = 0
    conflicted: int = 0
    extra: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.detached_at is not None:
            where = f"detached HEAD at {self.detached_at}"
        else:
            where = f"branch {self.branch}"
        if self.upstream is not None:
            where += f" (upstream {self.upstream}: ahead {self.ahead}, behind {self.behind})"
        counts = [
            f"{count} {label}"
            for count, label in (
                (self.staged, "staged"),
                (self.modified, "modified"),
                (self.untracked, "untracked"),
                (self.conflicted, "conflicted"),
            )
            if count
        ]
        return f"{where}; {', '.join(counts) if counts else 'clean'}"


def parse_status(output: str) -> GitStatus:
    status = GitStatus()
    oid: str | None = None
    for line in output.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.removeprefix("# branch.oid ")
        elif line.startswith("# branch.head "):
            status.branch = line.removeprefix("# branch.head ")
        elif line.startswith("# branch.upstream "):
            status.upstream = line.removeprefix("# branch.upstream ")
        elif line.startswith("# branch.ab "):
            ahead, behind = line.removeprefix("# branch.ab ").split()
            status.ahead, status.behind = int(ahead), abs(int(behind))
        elif line.startswith(("1 ", "2 ")):
            xy = line[2:4]  # index and worktree status; "." means unchanged
            status.staged += xy[0] != "."
            status.modified += xy[1] != "."
        elif line.startswith("u "):
            status.conflicted += 1
        elif line.startswith("? "):
            status.untracked += 1
    if status.branch == "(detached)":
        status.branch = None
        status.detached_at = oid[:7] if oid and oid != "(initial)" else "an unknown commit"
    return status


SAFE_CONFIG = (
    "core.fsmonitor=false",  # a hook command git runs to learn what changed
    "core.untrackedCache=false",
    f"core.hooksPath={os.devnull}",  # post-index-change, should a write happen anyway
    "core.pager=cat",
    "diff.external=",
)
"""Settings that override the repository's own config, which may come with a checkout
somebody else made (a tarball with its .git) and name commands for git to run."""


def git_environment() -> dict[str, str]:
    # C locale: the "not a git repository" test below reads git's message.
    # No optional locks: a status run must not take the index lock from the user's git
    # (nor write the index, which would run hooks).
    return with_safe_git(
        {
            **os.environ,
            "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
        }
    )


async def _git(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, bytes, bytes]:
    """Run git to its end: (exit status, stdout, stderr). A git still running when this
    is cancelled (a timeout, the assembly going away) is killed and reaped."""
    argv, options = helper_command(["git", *args])  # dies with dsh
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        **options,
    )
    try:
        out, err = await process.communicate()
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out, err


def _unavailable(code: int, err: bytes) -> str:
    message = err.decode(errors="replace").strip()
    if "not a git repository" in message:
        return "not a git repository"
    first = message.splitlines()[0] if message else f"exit status {code}"
    return f"status unavailable ({first})"


TRUSTED_SCOPES = frozenset({"system", "global", "command"})
"""Where a filter driver's definition is the user's own; one from the repository's
config (``local``, ``worktree``, or a file either includes) is not."""


def filter_overrides(listed: bytes, *, scoped: bool) -> list[str] | None:
    """``-c`` settings that switch off the filter drivers the repository's config
    defines: a clean filter is a command git runs on each file whose stat data changed.
    ``listed`` is what ``git config -z [--show-scope] --name-only --get-regexp`` printed
    for :data:`LISTING` (entries other than a filter's are passed over); without scopes,
    every driver listed is switched off. None when a name cannot be passed safely."""
    fields = listed.decode(errors="surrogateescape").split("\0")
    pairs = zip(fields[::2], fields[1::2], strict=False) if scoped else (("", f) for f in fields)
    names: dict[str, None] = {}
    for scope, entry in pairs:
        if scoped and scope in TRUSTED_SCOPES:
            continue
        name, dot, _ = entry.removeprefix("filter.").rpartition(".")
        if not entry.startswith("filter.") or not dot or not name:
            continue  # "filter.clean": no driver name, nothing git would run
        if "=" in name:
            return None  # `-c` cuts at the first "="
        names.setdefault(name, None)
    overrides = []
    for name in names:
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            overrides += ["-c", f"filter.{name}.{key}={value}"]
    return overrides


INCLUDES = ("include.", "includeif.")
"""Config entries that read another file, which a :class:`FilterCache` key cannot follow."""

LISTING = ("--name-only", "--get-regexp", r"^(filter|include|includeif)\.")
"""The filter drivers configured, and the includes that may define more."""


def _names(listed: bytes, *, scoped: bool) -> list[str]:
    fields = listed.decode(errors="surrogateescape").split("\0")
    return fields[1::2] if scoped else fields


def _signature(path: Path) -> Hashable:
    """What changes whenever ``path`` does: a file's identity, size and times (the
    change time too, which no one can set back), a folder's kind and owner (its times
    move with every lock file git makes in it)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    kind = stat.S_IFMT(found.st_mode)
    if kind == stat.S_IFDIR:
        return (kind, found.st_uid)
    return (kind, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def _gitdir_of(gitfile: Path) -> Path | None:
    """The folder a ``.git`` file (a worktree's, a submodule's) points to."""
    try:
        text = gitfile.read_text(errors="replace")
    except OSError:
        return None
    first = text.splitlines()[0] if text else ""
    if not first.startswith("gitdir: "):
        return None
    return (gitfile.parent / first.removeprefix("gitdir: ").strip()).resolve()


def config_key(cwd: Path) -> Hashable | None:
    """A value that changes whenever a config file git would read for ``cwd`` may
    have changed: git's environment, the user's config files, and, in ``cwd`` and each
    folder above it, the ``.git`` git may find there and the config files it leads to
    (a worktree's ``.git`` file, its ``commondir``, a bare repository's ``config``). None
    when it cannot say."""
    environ = os.environ
    if environ.get("GIT_DIR") or environ.get("GIT_COMMON_DIR"):
        return None  # a repository named from outside: not worth following
    home = Path(environ.get("HOME") or Path.home())
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [home / ".gitconfig", xdg / "git" / "config"]
    if environ.get("GIT_CONFIG_GLOBAL"):
        files.append(Path(environ["GIT_CONFIG_GLOBAL"]))
    for folder in (cwd, *cwd.parents):
        dot = folder / ".git"
        files += [dot, folder / "config", folder / "commondir"]
        gitdirs = [dot]
        if dot.is_file():
            found = _gitdir_of(dot)
            if found is not None:
                gitdirs.append(found)
                files.append(found)
        for gitdir in gitdirs:
            files += [gitdir / "config", gitdir / "config.worktree", gitdir / "commondir"]
            try:
                common = (gitdir / "commondir").read_text(errors="replace").strip()
            except OSError:
                continue
            if common:
                files.append((gitdir / common).resolve() / "config")
    git_variables = tuple(sorted((k, v) for k, v in environ.items() if k.startswith("GIT_")))
    return (
        str(cwd),
        git_variables,
        tuple(_signature(path) for path in files),
    )


@dataclass
class FilterCache:
    """The overrides of the last filter listing, and the :func:`config_key` it was
    made under: the next status reuses them while the key is the same, saving a git
    run a turn. None is kept when the listing named an include (another file, which
    the key does not follow): then every status lists again."""

    key: Hashable = None
    overrides: list[str] | None = None

    def get(self, key: Hashable) -> list[str] | None:
        return self.overrides if key is not None and key == self.key else None

    def keep(self, key: Hashable, overrides: list[str], names: list[str]) -> None:
        cacheable = not any(name.startswith(INCLUDES) for name in names)
        self.key, self.overrides = (key, overrides) if cacheable else (None, None)


async def git_summary(
    cwd: Path, seconds: float = GIT_TIMEOUT, cache: FilterCache | None = None
) -> str:
    """One line on the repository at ``cwd``; never raises for git's sake, and runs
    nothing the repository's config names (hooks, fsmonitor, filters, pagers). With
    ``cache``, the repository's filter drivers are listed again only when a config
    file may have changed."""
    if shutil.which("git") is None:
        return "git is not installed"
    env = git_environment()
    safe = [arg for setting in SAFE_CONFIG for arg in ("-c", setting)]
    try:
        async with asyncio.timeout(seconds):
            # The key before the listing: a change made while git lists gives the
            # next status another key, so nothing stale is ever reused.
            key = await asyncio.to_thread(config_key, cwd) if cache is not None else None
            overrides = cache.get(key) if cache is not None else None
            if overrides is None:
                scoped = True
                code, listed, err = await _git(
                    cwd, env, *safe, "config", "-z", "--show-scope", *LISTING
                )
                if code == 129:  # a git before 2.26, without --show-scope
                    scoped = False
                    code, listed, err = await _git(cwd, env, *safe, "config", "-z", *LISTING)
                if code not in (0, 1):  # 1: no filter configured
                    return _unavailable(code, err)
                overrides = filter_overrides(listed, scoped=scoped) if code == 0 else []
                if overrides is None:
                    return "status unavailable (a filter driver with an unusual name is configured)"
                if cache is not None:
                    names = _names(listed, scoped=scoped) if code == 0 else []
                    cache.keep(key, overrides, names)
            code, out, err = await _git(
                cwd,
                env,
                *safe,
                *overrides,
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "--branch",
                "--ignore-submodules=dirty",  # no git run inside submodules, on their config
            )
    except TimeoutError:
        return f"status unavailable (git took longer than {seconds:g} s)"
    except OSError as error:
        return f"status unavailable ({error.strerror or error})"
    if code != 0:
        return _unavailable(code, err)
    return parse_status(out.decode(errors="replace")).describe()


def environment_context() -> Render:
    # git runs again only when the tree may have changed: a new turn, or a step after
    # a tool with effects; a step after reads alone reuses the last answer.
    filters = FilterCache()
    git = per_workspace(lambda pc: git_summary(pc.cwd, cache=filters))

    async def render(pc: PromptContext) -> str:
        today = datetime.date.today().isoformat()  # the user's local date, not UTC
        return f"Today's date: {today}\nGit: {await git(pc)}"

    return render


def apply(ctx: Context, config: object) -> None:
    prompt = ctx.get(PROMPT)
    # Gathered once by the runtime; a replay's are the recorded machine's. A context
    # without the service (dsh embedded in a program of its own) gets this machine's.
    host = ctx.get(HOST, None) or HostFacts.this_machine()
    prompt.variable("platform", lambda pc: host.platform)
    prompt.variable("shell", lambda pc: host.login_shell)
    prompt.section("environment", 50, SECTION)
    prompt.context("environment", 50, environment_context())


plugin = Plugin(
    name="environment",
    description="Working directory, platform, shell, date and git status for the model",
    inject=(PROMPT,),
    optional=(HOST,),
    apply=apply,
)
