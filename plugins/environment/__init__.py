"""The environment the agent works in.

A system-prompt section holds what stays put for a session (working directory,
platform, shell), so the cacheable prompt does not change; a context entry holds what
moves (today's date and the git status), which the loop re-enters only when it changes.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh.kernel import Context, Plugin
from dsh.prompt import PROMPT, PromptContext
from dsh.session import ToolCall

GIT_TIMEOUT = 2.0
"""Seconds git may take before the status is reported as unavailable."""

SECTION = """\
Environment:
- Working directory: {{cwd}}
- Platform: {{platform}}
- Shell: {{shell}}"""


def platform_summary() -> str:
    return f"{platform.system() or 'unknown'} {platform.release()}".strip()


def shell_summary() -> str:
    return os.environ.get("SHELL") or "unknown"


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


async def git_summary(cwd: Path, seconds: float = GIT_TIMEOUT) -> str:
    """One line on the repository at ``cwd``; never raises for git's sake."""
    if shutil.which("git") is None:
        return "git is not installed"
    # C locale: the "not a git repository" test below reads git's message.
    # No optional locks: a status run must not take the index lock from the user's git.
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            "status",
            "--porcelain=v2",
            "--branch",
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        return f"status unavailable ({error.strerror or error})"
    try:
        out, err = await asyncio.wait_for(process.communicate(), seconds)
    except TimeoutError:
        process.kill()
        await process.wait()
        return f"status unavailable (git took longer than {seconds:g} s)"
    except BaseException:
        # Cancelled with the assembly: leave no git process behind.
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    if process.returncode != 0:
        message = err.decode(errors="replace").strip()
        if "not a git repository" in message:
            return "not a git repository"
        first = message.splitlines()[0] if message else f"exit status {process.returncode}"
        return f"status unavailable ({first})"
    return parse_status(out.decode(errors="replace")).describe()


@dataclass
class _Seen:
    """What was last learnt about one session's working tree."""

    key: tuple[Any, ...] = ()
    summary: str = ""
    scanned: int = 0
    changes: int = 0


class GitWatch:
    """Runs ``git status`` only when the working tree may have changed: at a new turn,
    or after a tool call that is not read-only (an edit, a command). A step after
    reads only reuses the last answer instead of starting git again."""

    def __init__(self) -> None:
        self._seen: dict[Any, _Seen] = {}

    def _key(self, pc: PromptContext) -> tuple[Any, ...] | None:
        agent = pc.agent
        session = getattr(agent, "session", None)
        tools = getattr(agent, "tools", None)
        if session is None or tools is None:
            return None  # not an agent of ours: always ask git
        seen = self._seen.setdefault(session.id, _Seen())
        events = session.events
        for event in events[seen.scanned :]:
            data = event.data
            if isinstance(data, ToolCall):
                tool = tools.get(data.name, agent)
                if tool is None or not tool.read_only:
                    seen.changes += 1
        seen.scanned = len(events)
        return (str(pc.cwd), session.last_turn, seen.changes)

    async def summary(self, pc: PromptContext) -> str:
        key = self._key(pc)
        if key is None:
            return await git_summary(pc.cwd)
        seen = self._seen[pc.agent.session.id]
        if seen.key != key:
            seen.summary = await git_summary(pc.cwd)
            seen.key = key
        return seen.summary


def environment_context(watch: GitWatch) -> Any:
    async def render(pc: PromptContext) -> str:
        today = datetime.date.today().isoformat()  # the user's local date, not UTC
        return f"Today's date: {today}\nGit: {await watch.summary(pc)}"

    return render


def apply(ctx: Context, config: object) -> None:
    prompt = ctx.get(PROMPT)
    prompt.variable("platform", lambda pc: platform_summary())
    prompt.variable("shell", lambda pc: shell_summary())
    prompt.section("environment", 50, SECTION)
    prompt.context("environment", 50, environment_context(GitWatch()))


plugin = Plugin(
    name="environment",
    description="Working directory, platform, shell, date and git status for the model",
    inject=("prompt",),
    apply=apply,
)
