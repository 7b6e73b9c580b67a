"""The ``jobs`` service: work that outlives the tool call that started it.

A job belongs to the session that started it (its *owner*); other sessions do not see
it. Its id is ``<kind>-<n>`` (``bash-1``), numbered per owner and kind. At most
``MAX_RUNNING`` jobs run per owner. A job is ``running``, ``stopping`` (a kill was
asked for), then ``completed``, ``failed`` or ``killed``, with a detail such as
``exit code: 3``.

What a job does lives in its :class:`JobBody`; the service owns the task that runs it
(every job task belongs to the plugin's context, so disposing the plugin ends them).

When a job ends before anyone read its end through ``job_output``, the agent that
started it gets a notice: steered into its running turn, or waking it for a turn of
its own. An agent is woken at most ``MAX_WAKES`` times in a row this way; the count
starts again when the user sends a prompt. Past the cap the notice is entered as
context for the next turn, without waking anyone.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from dsh.agent import AgentHandle
from dsh.kernel import Context
from dsh.llm import PluginSource, user_text
from dsh.tools import ToolError

MAX_RUNNING = 10
MAX_WAKES = 3
KEEP_SETTLED = 50
"""Ended jobs remembered per owner; older ones are forgotten."""

JobStatus = Literal["running", "stopping", "completed", "killed", "failed"]

_log = logging.getLogger("dsh.plugins.bash")


@dataclass(frozen=True)
class JobEnd:
    status: Literal["completed", "failed", "killed"]
    detail: str | None = None


class JobBody(Protocol):
    """What one kind of job does."""

    async def run(self) -> JobEnd:
        """Do the work, to its end. Cancelled when the service goes away."""
        ...

    async def stop(self) -> None:
        """End the work early; ``run`` then returns."""
        ...

    def read(self, final: bool) -> str:
        """Output since the last read ('' for none). ``final``: the job has ended."""
        ...


@dataclass(eq=False)
class Job:
    id: str
    kind: str
    owner: str
    label: str
    body: JobBody
    agent: AgentHandle | None = None
    """The agent that started it, told when it ends."""
    status: JobStatus = "running"
    detail: str | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    reported: bool = False
    """Its end was read through job_output."""
    quiet: bool = False
    """Nobody needs telling when it ends (it was killed on request)."""
    notified: bool = False
    waiters: int = 0
    kill_reason: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.status in ("running", "stopping")

    def status_line(self) -> str:
        if self.detail:
            return f"[status: {self.status}, {self.detail}]"
        return f"[status: {self.status}]"


def notice_text(job: Job) -> str:
    detail = f" ({job.detail})" if job.detail else ""
    return (
        f"Background job {job.id} [{job.kind}] {job.label!r} has ended: {job.status}{detail}. "
        f'Its output has not been read yet: call job_output with job_id "{job.id}".'
    )


class JobService:
    def __init__(
        self,
        tasks: Context,
        *,
        max_running: int = MAX_RUNNING,
        max_wakes: int = MAX_WAKES,
        plugin: str = "bash",
    ) -> None:
        self._tasks = tasks
        self.max_running = max_running
        self.max_wakes = max_wakes
        self._plugin = plugin
        self._jobs: dict[str, dict[str, Job]] = {}
        self._counters: dict[tuple[str, str], int] = {}
        self._wakes: weakref.WeakKeyDictionary[AgentHandle, int] = weakref.WeakKeyDictionary()
        self._closed = False

    # ------------------------------------------------------------------ starting

    def check_capacity(self, owner: str) -> None:
        """Raise JOB_LIMIT when ``owner`` may not start another job now."""
        if self._closed:
            raise ToolError("Background jobs are shutting down.", "JOB_UNAVAILABLE")
        running = sum(1 for job in self.jobs(owner) if job.running)
        if running >= self.max_running:
            raise ToolError(
                f"{running} background jobs are already running (the limit is "
                f"{self.max_running}); wait for one to end or stop one with job_kill.",
                "JOB_LIMIT",
            )

    def start(
        self, *, owner: str, kind: str, label: str, body: JobBody, agent: AgentHandle | None = None
    ) -> Job:
        """Run ``body`` as a new job. Raises like :meth:`check_capacity`; the caller
        then still owns the body."""
        self.check_capacity(owner)
        number = self._counters.get((owner, kind), 0) + 1
        self._counters[(owner, kind)] = number
        job = Job(f"{kind}-{number}", kind, owner, label, body, agent)
        self._jobs.setdefault(owner, {})[job.id] = job
        job.task = self._tasks.spawn(self._run(job), name=f"job:{job.id}")
        self._forget_old(owner)
        return job

    async def _run(self, job: Job) -> None:
        try:
            end = await job.body.run()
        except asyncio.CancelledError:
            self._settle(job, JobEnd("killed", job.kill_reason or "cancelled"), quiet=True)
            raise
        except Exception as error:
            _log.exception("background job %s failed", job.id)
            end = JobEnd("failed", f"{type(error).__name__}: {error}")
        if job.kill_reason is not None:
            end = JobEnd("killed", job.kill_reason)
        self._settle(job, end)

    def _settle(self, job: Job, end: JobEnd, *, quiet: bool = False) -> None:
        if job.ended.is_set():
            return
        job.status, job.detail = end.status, end.detail
        job.quiet |= quiet
        job.ended.set()
        self._maybe_notify(job)

    # ------------------------------------------------------------------ asking

    def jobs(self, owner: str) -> list[Job]:
        return list(self._jobs.get(owner, {}).values())

    def get(self, owner: str, job_id: str) -> Job:
        job = self._jobs.get(owner, {}).get(job_id)
        if job is None:
            known = ", ".join(self._jobs.get(owner, {})) or "none"
            raise ToolError(
                f"No background job {job_id!r} in this session (jobs: {known}).", "JOB_NOT_FOUND"
            )
        return job

    def read(self, job: Job) -> str:
        """Output since the last read, then the status line. Reading an ended job
        reports its end, so no notice is sent for it."""
        ended = job.ended.is_set()
        text = job.body.read(ended) or "(no new output)"
        if ended:
            job.reported = True
        return f"{text}\n{job.status_line()}"

    async def wait(self, job: Job, seconds: float, signal: asyncio.Event | None = None) -> bool:
        """Wait up to ``seconds`` for ``job`` to end (or ``signal``); whether it
        ended. The caller is expected to :meth:`read` it next: a job ending during the
        wait is not announced to the agent unless the wait is cancelled."""
        if job.ended.is_set():
            return True
        job.waiters += 1
        waits = [asyncio.ensure_future(job.ended.wait())]
        if signal is not None:
            waits.append(asyncio.ensure_future(signal.wait()))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            job.waiters -= 1
            # Read synchronously after we return (then this finds it reported), or
            # never, when the wait was cancelled: then the agent is told after all.
            asyncio.get_running_loop().call_soon(self._maybe_notify, job)
        return job.ended.is_set()

    # ------------------------------------------------------------------ stopping

    def kill(self, job: Job, reason: str | None = None) -> bool:
        """Ask a running job to stop and return at once; False if it had ended."""
        if not job.running:
            return False
        if job.status == "running":
            job.status = "stopping"
            job.kill_reason = reason or "killed by job_kill"
            job.quiet = True  # whoever asked knows
            self._tasks.spawn(job.body.stop(), name=f"job-stop:{job.id}")
        return True

    async def close_owner(self, owner: str, reason: str = "session closed") -> None:
        """End an owner's jobs silently (its session is going away) and forget them."""
        await self._stop_all(self.jobs(owner), reason)
        self._jobs.pop(owner, None)

    async def aclose(self) -> None:
        """End every job silently; no job starts after this."""
        self._closed = True
        await self._stop_all(
            [job for owned in self._jobs.values() for job in owned.values()], "dsh stopped"
        )

    async def _stop_all(self, jobs: Iterable[Job], reason: str) -> None:
        running = [job for job in jobs if job.running]
        for job in running:
            job.quiet = True
            job.kill_reason = job.kill_reason or reason
            job.status = "stopping"
        await asyncio.gather(*(job.body.stop() for job in running), return_exceptions=True)
        tasks = [job.task for job in running if job.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)

    # ------------------------------------------------------------------ notices

    def user_prompted(self, agent: AgentHandle) -> None:
        """The user spoke: notices may wake ``agent`` again."""
        self._wakes.pop(agent, None)

    def _maybe_notify(self, job: Job) -> None:
        if (
            not job.ended.is_set()
            or job.reported
            or job.quiet
            or job.notified
            or job.waiters
            or job.agent is None
        ):
            return
        job.notified = True
        message = user_text(
            notice_text(job), source=PluginSource(plugin=self._plugin, form="notice")
        )
        agent = job.agent
        try:
            if agent.accepts_next_step:
                agent.steer(message)  # joins the running turn: nobody is woken
                return
            wakes = self._wakes.get(agent, 0)
            if wakes >= self.max_wakes:
                # Enough turns started without the user: leave it for the next one.
                agent.inject(message)
                return
            self._wakes[agent] = wakes + 1
            agent.steer(message)
        except Exception:
            _log.exception("could not tell the agent that job %s ended", job.id)

    def _forget_old(self, owner: str) -> None:
        owned = self._jobs.get(owner, {})
        ended = [job for job in owned.values() if not job.running]
        for job in ended[: max(0, len(ended) - KEEP_SETTLED)]:
            del owned[job.id]
