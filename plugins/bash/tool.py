"""The ``bash`` tool: one fresh ``bash -c`` per call, in the foreground or as a job.

A foreground command runs where the agent's command runner says, when a front end
provides one (an editor's terminal: ``delegated``), else here. Here it runs until it
exits, its timeout passes (then the whole process group is stopped and the output so
far returned with a ``[timed out after …]`` marker), or the turn is cancelled (the
group is stopped the same way and the call ends as ``ABORTED``). A non-zero exit or a
timeout is an ordinary result the model reads, not a tool error; only failing to start
bash is. Background jobs always run here.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from dsh.sandbox import SandboxUnavailable, Widening, Wrapped
from dsh.services import COMMAND_RUNNER, SANDBOX
from dsh.tools import (
    Action,
    ClaudeCodeName,
    Escalation,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from dsh_plugins.bash.background import BashJob
from dsh_plugins.bash.capture import SPILL_CAP_BYTES, TAIL_BYTES, StreamCapture, spill_opener
from dsh_plugins.bash.delegated import run_delegated
from dsh_plugins.bash.environment import shell_environment
from dsh_plugins.bash.jobs import JobService
from dsh_plugins.bash.present import bash_call, bash_result
from dsh_plugins.bash.process import GRACE_S, ShellProcess, SpawnError, spawn_shell
from dsh_plugins.bash.render import final_markers, render_output, signal_name
from dsh_plugins.bash.sandbox_hint import sandbox_hint

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000

DESCRIPTION = f"""\
Run a shell command with `bash -c` and return its output.

Each call starts a fresh, non-interactive shell (no state carries over between calls:
`cd`, variables and functions are gone afterwards) in the session's working directory,
or in `workdir`. stdin is empty, so commands that wait for input fail instead of
hanging; pass flags such as `--yes` or `--no-pager`. Colour and pagers are off, and
environment variables whose names look like credentials are not passed on.

The result is stdout, then `[stderr]` and stderr, then markers: `[exit code: N]` for a
non-zero exit, `[killed by signal: SIG…]`, `[timed out after Nms]`. Each stream keeps
its last {TAIL_BYTES} bytes; when there was more, `[output truncated; full output:
<path>]` names a file with all of it (up to {SPILL_CAP_BYTES // (1024 * 1024)} MiB),
to be searched or read in parts rather than printed again.

Commands run in an OS sandbox: by default the project and a private /tmp are
writable and the rest of the filesystem is read-only, secrets such as ~/.ssh are out of
sight, and there is no network but a loopback your commands share. When a command
fails because of it (a result marked `[sandbox: …]`: "Read-only file system" outside
the project, no network, a refused connection to a server outside), call it again with
`escalate` to ask the user to rerun it with more: `network`, `write` (existing
folders), or `unsandboxed` as a last resort, and a `reason`. The user is asked every
time (unless they allowed it for the session); ask only for what the command needs,
and never to get around a denial.

A command is stopped after `timeout_ms` (default {DEFAULT_TIMEOUT_MS}, at most
{MAX_TIMEOUT_MS}). For servers, watchers and anything long, set `run_in_background`:
the call returns a job id at once, and `job_output`, `job_list` and `job_kill` follow
the job; you are told when it ends.\
"""


def _no_default(schema: dict[str, Any]) -> None:
    # An optional argument shows up as its type alone, without a null default.
    schema.pop("default", None)


class EscalateArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    network: bool = Field(
        default=False, description="Use the network (the sandbox has only a loopback)."
    )
    write: list[str] = Field(
        default_factory=list,
        description="Existing folders (or files) outside the writable ones the command "
        "must write; a relative path is taken from where the command runs.",
    )
    unsandboxed: bool = Field(
        default=False,
        description="Run outside the sandbox altogether: only when nothing narrower works.",
    )
    reason: str = Field(description="Why the command needs it, in one sentence, for the user.")

    @field_validator("reason")
    @classmethod
    def _reason(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("say why the command needs more than the sandbox allows")
        return reason.strip()

    @field_validator("write")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        if any(not path.strip() or "\x00" in path for path in paths):
            raise ValueError("each path must be a non-empty path without NUL characters")
        return paths

    @model_validator(mode="after")
    def _something(self) -> EscalateArguments:
        if not (self.network or self.write or self.unsandboxed):
            raise ValueError("ask for at least one of network, write or unsandboxed")
        return self


class BashArguments(BaseModel):
    model_config = ConfigDict(extra="ignore")

    command: str = Field(description="The command line, run as `bash -c <command>`.")
    description: str = Field(description="What the command does, in 5-10 words, shown to the user.")
    timeout_ms: int | SkipJsonSchema[None] = Field(
        default=None,
        validation_alias=AliasChoices("timeout_ms", "timeoutMs"),
        description=(
            f"Milliseconds before the command is stopped (default {DEFAULT_TIMEOUT_MS}, "
            f"at most {MAX_TIMEOUT_MS}). Not used with run_in_background."
        ),
        json_schema_extra=_no_default,
    )
    workdir: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Directory to run in; a relative path is taken from the session's "
        "working directory, which is the default.",
        json_schema_extra=_no_default,
    )
    run_in_background: bool = Field(
        default=False,
        description="Start the command as a background job and return its id at once.",
    )
    escalate: EscalateArguments | SkipJsonSchema[None] = Field(
        default=None,
        description="Ask the user to run this command with more than the sandbox allows, "
        "after it failed because of the sandbox.",
        json_schema_extra=_no_default,
    )

    @field_validator("command")
    @classmethod
    def _not_blank(cls, command: str) -> str:
        if not command.strip():
            raise ValueError("the command is empty")
        if "\x00" in command:
            # bash -c takes the command as a C string, which ends at the first NUL.
            raise ValueError(
                "the command contains a NUL character, which a command line cannot hold "
                "(to produce a NUL byte, write printf '\\0')"
            )
        return command

    @field_validator("workdir")
    @classmethod
    def _no_nul(cls, workdir: str | None) -> str | None:
        if workdir is not None and "\x00" in workdir:
            raise ValueError("workdir must not contain a NUL character")
        return workdir

    @field_validator("timeout_ms")
    @classmethod
    def _positive(cls, timeout_ms: int | None) -> int | None:
        if timeout_ms is not None and timeout_ms < 1:
            raise ValueError("must be at least 1")
        return timeout_ms


@dataclass(frozen=True)
class BashSettings:
    default_timeout_ms: int = DEFAULT_TIMEOUT_MS
    env_passthrough: tuple[str, ...] = ()


def first_line(command: str) -> str:
    lines = command.strip().splitlines()
    return lines[0] if lines else ""


def describe(arguments: BashArguments, context: ToolContext) -> Action:
    workdir = None
    if arguments.workdir:
        # Where `> config` lands decides whether it writes .git/config.
        workdir = Path(os.path.realpath(context.cwd / Path(arguments.workdir).expanduser()))
    return Action(
        risk="exec",
        summary=first_line(arguments.command),
        details=arguments.command,
        command=arguments.command,
        workdir=workdir,
        sandboxed=True,
        escalation=escalation(arguments.escalate, workdir or context.cwd),
    )


def escalation(asked: EscalateArguments | None, where: Path) -> Escalation | None:
    """What the call asks beyond the sandbox: the paths as the sandbox will bind them
    (resolved; each must exist, as a folder cannot be bound before it is made)."""
    if asked is None:
        return None
    writable = []
    for text in asked.write:
        path = Path(os.path.realpath(where / Path(text).expanduser()))
        if not path.exists():
            raise ToolError(
                f"escalate.write: {text} does not exist; ask for a folder that exists "
                "(its parent, or make it first inside the project)",
                "INVALID_ARGUMENTS",
            )
        if path not in writable:
            writable.append(path)
    widening = Widening(
        network=asked.network, writable=tuple(writable), unsandboxed=asked.unsandboxed
    )
    return Escalation(widening, asked.reason)


def bash_tool(jobs: JobService, settings: BashSettings | None = None) -> ToolDefinition:
    chosen = settings or BashSettings()

    async def execute(arguments: BashArguments, context: ToolContext) -> ToolOutput:
        if context.signal.is_set():
            raise ToolError("The command was cancelled before it started.", "ABORTED")
        cwd = await resolve_workdir(arguments.workdir, context.cwd)
        env = shell_environment(
            os.environ, session_id=str(context.session_id), passthrough=chosen.env_passthrough
        )
        if arguments.run_in_background:
            return await start_job(arguments, context, jobs, cwd, env)
        timeout_ms = min(arguments.timeout_ms or chosen.default_timeout_ms, MAX_TIMEOUT_MS)
        services = context.services
        runner = services.get(COMMAND_RUNNER, None) if services is not None else None
        if runner is not None:  # the front end's place for commands (an editor's terminal)
            # The editor starts the sandbox's command line; it cannot join the
            # session's loopback (no code of ours runs in its child), so it gets its own.
            wrapped = await contain(arguments.command, context, cwd, env, shared_network=False)
            return await run_delegated(
                runner, arguments.command, context, cwd, env, timeout_ms, wrapped=wrapped
            )
        return await run_command(arguments.command, context, cwd, env, timeout_ms)

    return ToolDefinition(
        name="bash",
        description=DESCRIPTION,
        arguments=BashArguments,
        execute=execute,
        kind="execute",
        describe=describe,
        present_call=bash_call,
        present_result=bash_result,
        claude_code=ClaudeCodeName("Bash", fields=(("timeout_ms", "timeout"),)),
    )


def _directory(cwd: Path, workdir: str) -> Path | None:
    path = cwd / Path(workdir).expanduser()  # an absolute workdir replaces cwd
    return path if path.is_dir() else None


async def resolve_workdir(workdir: str | None, cwd: Path) -> Path:
    if not workdir:
        return cwd
    path = await asyncio.to_thread(_directory, cwd, workdir)
    if path is None:
        raise ToolError(f"workdir {workdir!r} is not a directory.", "BASH_BAD_WORKDIR")
    return path


async def spawn(
    command: str,
    context: ToolContext,
    cwd: Path,
    env: dict[str, str],
    stdout: StreamCapture,
    stderr: StreamCapture,
) -> ShellProcess:
    """Start the command, inside the sandbox when the runtime has one (widened as the
    person approved for this call, ``context.widening``)."""
    wrapped = await contain(command, context, cwd, env)
    try:
        return await spawn_shell(
            command, cwd=cwd, env=env, stdout=stdout.feed, stderr=stderr.feed, wrapped=wrapped
        )
    except SpawnError as error:
        raise ToolError(f"Could not start bash: {error}", "BASH_SPAWN_FAILED") from error


async def contain(
    command: str,
    context: ToolContext,
    cwd: Path,
    env: dict[str, str],
    *,
    shared_network: bool = True,
) -> Wrapped | None:
    services = context.services
    sandbox = services.get(SANDBOX, None) if services is not None else None
    if sandbox is None:
        return None
    try:
        return await sandbox.wrap(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            widening=context.widening,
            shared_network=shared_network,
        )
    except SandboxUnavailable as error:
        raise ToolError(
            f"The command did not run: the sandbox cannot start ({error}).",
            "SANDBOX_UNAVAILABLE",
        ) from error


def _hint(context: ToolContext, content: str) -> str | None:
    """The sandbox's part in a failure, when it ran the command."""
    services = context.services
    sandbox = services.get(SANDBOX, None) if services is not None else None
    status = sandbox.status if sandbox is not None else None
    if status is None or not status.active:
        return None
    return sandbox_hint(content, status.policy, context.widening or Widening())


async def run_command(
    command: str, context: ToolContext, cwd: Path, env: dict[str, str], timeout_ms: int
) -> ToolOutput:
    opener = spill_opener(context)
    stdout, stderr = StreamCapture("bash-stdout", opener), StreamCapture("bash-stderr", opener)
    loop = asyncio.get_running_loop()
    started = loop.time()
    shell = await spawn(command, context, cwd, env, stdout, stderr)
    finished = False
    try:
        stop = await supervise(shell, timeout_ms / 1000, context.signal)
        if stop is not None:
            await shell.terminate()
        await shell.drain(GRACE_S)
        returncode = await exit_status(shell)
        finished = True
    except asyncio.CancelledError:
        await shell.terminate()
        raise
    finally:
        if not finished:
            shell.kill()  # a second cancel, or a failure: no time to be gentle
        shell.close()
        stdout.close()
        stderr.close()
    elapsed_ms = round((loop.time() - started) * 1000)
    if stop == "cancel":
        partial = render_output(stdout, stderr, final_markers(timed_out_ms=None, returncode=None))
        raise ToolError(f"The command was cancelled after {elapsed_ms}ms.\n{partial}", "ABORTED")
    timed_out_ms = timeout_ms if stop == "timeout" else None
    content = render_output(
        stdout, stderr, final_markers(timed_out_ms=timed_out_ms, returncode=returncode)
    )
    hint = _hint(context, content)
    if hint is not None:
        content = f"{content}\n{hint}"
    meta = {
        "exitCode": returncode if returncode is None or returncode >= 0 else None,
        "signal": signal_name(-returncode) if returncode is not None and returncode < 0 else None,
        "timedOut": stop == "timeout",
        "durationMs": elapsed_ms,
        "cwd": str(cwd),
        "spill": {
            name: str(capture.spill_path)
            for name, capture in (("stdout", stdout), ("stderr", stderr))
            if capture.spill_path is not None
        },
    }
    return ToolOutput(content=content, meta=meta, spilled=stdout.spilled or stderr.spilled)


async def budget_spent(seconds: float) -> None:
    """Returns once a command's time budget of ``seconds`` has run out: the clock's
    part of :func:`supervise`, apart so that a test can say when that moment is (a
    command that must be part-way through when it comes)."""
    await asyncio.sleep(seconds)


async def supervise(
    shell: ShellProcess, seconds: float, signal: asyncio.Event
) -> Literal["timeout", "cancel"] | None:
    """Wait for bash to exit; or the reason it must be stopped instead."""
    exited = asyncio.ensure_future(shell.wait())
    cancelled = asyncio.ensure_future(signal.wait())
    spent = asyncio.ensure_future(budget_spent(seconds))
    try:
        await asyncio.wait({exited, cancelled, spent}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        exited.cancel()
        cancelled.cancel()
        spent.cancel()
    if shell.returncode is not None:
        return None
    return "cancel" if signal.is_set() else "timeout"


async def exit_status(shell: ShellProcess) -> int | None:
    """bash's exit status; None if even SIGKILL did not end it (a process stuck in the
    kernel), rather than waiting for it forever."""
    if shell.returncode is not None:
        return shell.returncode
    try:
        return await asyncio.wait_for(shell.wait(), GRACE_S)
    except TimeoutError:
        return None


async def start_job(
    arguments: BashArguments,
    context: ToolContext,
    jobs: JobService,
    cwd: Path,
    env: dict[str, str],
) -> ToolOutput:
    owner = str(context.session_id)
    jobs.check_capacity(owner)  # before anything starts
    opener = spill_opener(context)
    stdout, stderr = StreamCapture("job-stdout", opener), StreamCapture("job-stderr", opener)
    shell = await spawn(arguments.command, context, cwd, env, stdout, stderr)
    label = arguments.description.strip() or first_line(arguments.command)
    try:
        job = jobs.start(
            owner=owner,
            kind="bash",
            label=label,
            body=BashJob(shell, stdout, stderr),
            agent=context.agent,
        )
    except BaseException:
        shell.kill()
        shell.close()
        raise
    return ToolOutput(
        content=f"started background job {job.id}",
        meta={"jobId": job.id, "background": True, "cwd": str(cwd)},
    )
