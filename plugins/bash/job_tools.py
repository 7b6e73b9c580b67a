"""``job_output``, ``job_list`` and ``job_kill``: following background jobs.

Every call sees only the jobs of its own session.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from dsh.tools import Action, ToolContext, ToolDefinition, ToolOutput
from dsh_plugins.bash.jobs import JobService

DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 600_000


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class JobOutputArguments(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str = Field(description="The job's id, such as `bash-1`.")
    wait: bool = Field(
        default=False, description="Wait for the job to end (up to timeout_ms) before reading."
    )
    timeout_ms: int | SkipJsonSchema[None] = Field(
        default=None,
        validation_alias=AliasChoices("timeout_ms", "timeoutMs"),
        description=f"How long to wait, in milliseconds (default {DEFAULT_WAIT_MS}, at most "
        f"{MAX_WAIT_MS}). The job keeps running when the wait runs out.",
        json_schema_extra=_no_default,
    )

    @field_validator("timeout_ms")
    @classmethod
    def _positive(cls, timeout_ms: int | None) -> int | None:
        if timeout_ms is not None and timeout_ms < 1:
            raise ValueError("must be at least 1")
        return timeout_ms


class JobListArguments(BaseModel):
    model_config = ConfigDict(extra="ignore")


class JobKillArguments(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str = Field(description="The job's id, such as `bash-1`.")
    reason: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Why it is stopped, kept as its status detail.",
        json_schema_extra=_no_default,
    )


def job_tools(jobs: JobService) -> list[ToolDefinition]:
    async def job_output(arguments: JobOutputArguments, context: ToolContext) -> ToolOutput:
        job = jobs.get(str(context.session_id), arguments.job_id)
        if arguments.wait and job.running:
            wait_ms = min(arguments.timeout_ms or DEFAULT_WAIT_MS, MAX_WAIT_MS)
            await jobs.wait(job, wait_ms / 1000, context.signal)
        text = jobs.read(job)
        return ToolOutput(content=text, meta={"jobId": job.id, "status": job.status})

    async def job_list(arguments: JobListArguments, context: ToolContext) -> ToolOutput:
        listed = jobs.jobs(str(context.session_id))
        if not listed:
            return ToolOutput(content="(no background jobs)")
        lines = [f"{job.id} [{job.kind}] {job.status} — {job.label}" for job in listed]
        return ToolOutput(content="\n".join(lines))

    async def job_kill(arguments: JobKillArguments, context: ToolContext) -> ToolOutput:
        job = jobs.get(str(context.session_id), arguments.job_id)
        if not jobs.kill(job, arguments.reason):
            return ToolOutput(content=f"{job.id} had already ended.\n{job.status_line()}")
        return ToolOutput(content=f"stopping {job.id}\n{job.status_line()}")

    def describe_kill(arguments: JobKillArguments, context: ToolContext) -> Action:
        # Only the caller's own jobs can be reached, which the permission rules never
        # ask about: the risk is that of reading, though the call changes something.
        return Action(risk="read", summary=f"stop background job {arguments.job_id}")

    return [
        ToolDefinition(
            name="job_output",
            description="Read a background job's output since the last read, optionally "
            "waiting for it to end first. Ends with the job's status line, such as "
            "`[status: running]` or `[status: failed, exit code: 3]`.",
            arguments=JobOutputArguments,
            execute=job_output,
            read_only=True,
        ),
        ToolDefinition(
            name="job_list",
            description="List this session's background jobs: `id [kind] status — label`.",
            arguments=JobListArguments,
            execute=job_list,
            read_only=True,
        ),
        ToolDefinition(
            name="job_kill",
            description="Stop a background job (its whole process group). Returns at once; "
            "the job shows `stopping`, then `killed`.",
            arguments=JobKillArguments,
            execute=job_kill,
            kind="execute",
            describe=describe_kill,
        ),
    ]
