"""Shell commands and background jobs: the ``bash``, ``job_output``, ``job_list`` and
``job_kill`` tools, and the ``jobs`` service.

Every call is a fresh ``bash -c`` in a process group of its own (``process``), with a
scrubbed environment (``environment``); each output stream keeps its tail in memory and
spills whole to a file (``capture``), and the result is rendered with the markers of
``render``. ``run_in_background`` hands the process to the ``jobs`` service (``jobs``,
``background``), which tells the agent when a job it started has ended.

Settings (``[plugins.bash]``): ``default_timeout_ms`` and ``env_passthrough``, names
of environment variables passed on to commands even though they look like credentials
(the older spelling of ``[environment] passthrough``, which terminals and hooks honour
too; either is read from the user's own settings only).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dsh.agent import PromptDecision, PromptSubmit
from dsh.hooks import AGENT_DISPOSED, AGENT_PROMPT_SUBMIT
from dsh.kernel import Context, Next, Plugin, ServiceKey
from dsh.llm import UserSource
from dsh.services import SETTINGS, TOOLS
from dsh.tools import user_passthrough
from dsh_plugins.bash.job_tools import job_tools
from dsh_plugins.bash.jobs import JobService
from dsh_plugins.bash.tool import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, BashSettings, bash_tool

JOBS: ServiceKey[JobService] = ServiceKey("jobs")


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    default_timeout_ms: int = Field(default=DEFAULT_TIMEOUT_MS, ge=1, le=MAX_TIMEOUT_MS)
    env_passthrough: tuple[str, ...] = ()
    """Variables passed to commands although their names look like credentials."""


def apply(ctx: Context, config: Config) -> None:
    # Job tasks live in a child context, created before the closing effect below: the
    # effects run newest first, so every job is stopped at once (concurrently, each
    # with its grace period) before the tasks that remain are cancelled one by one.
    jobs = JobService(ctx.child(name="bash:jobs"))
    ctx.effect(lambda: jobs.aclose)
    ctx.provide(JOBS, jobs)

    # Only the user's own layers pass a secret on: a trusted project's table is merged
    # into ``config`` but names nothing here (dsh.tools.user_passthrough).
    own = ctx.get(SETTINGS, None)
    passthrough = tuple(config.env_passthrough)
    if own is not None:
        mine = own.own_section("plugins", plugin.name).get("env_passthrough", ())
        passthrough = tuple(dict.fromkeys((*user_passthrough(own), *_names(mine))))
    settings = BashSettings(config.default_timeout_ms, passthrough)
    for tool in (bash_tool(jobs, settings), *job_tools(jobs)):
        ctx.get(TOOLS).register(tool.name, tool)

    async def on_prompt(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        # A prompt from the user ends a run of turns started by job notices.
        if isinstance(submit.message.source, UserSource):
            jobs.user_prompted(submit.agent)
        return await next_()

    ctx.on(AGENT_PROMPT_SUBMIT, on_prompt)
    # The session is going away: its jobs end with it, without notices.
    ctx.on(AGENT_DISPOSED, lambda agent: jobs.close_owner(str(agent.id)))


def _names(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(name for name in value if isinstance(name, str))


plugin = Plugin(
    name="bash",
    description="Shell commands (bash -c) and background jobs",
    inject=(TOOLS,),
    optional=(SETTINGS,),
    provides=(JOBS,),
    config=Config,
    apply=apply,
)
