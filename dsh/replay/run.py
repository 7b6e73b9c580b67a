"""Running a recorded session again: a fresh runtime, a new agent, the recorded inputs.

The replay runs the code of this dsh, with the plugins it finds, in a scratch
``$DSH_HOME`` and a scratch working folder (both removed afterwards): the stored
session is only read. A new agent on a new session is fed the person's recorded
inputs in order (:mod:`dsh.replay.serve` applies those due inside a turn; the idle
ones are applied here, between turns), while the stand-in answers for the model and,
by default, for the tools.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dsh.kernel import Candidate
from dsh.llm import GenerateOptions, SessionId
from dsh.replay.recorded import IdlePoint, Recording
from dsh.replay.serve import PACE_CAP_S, StandIn
from dsh.session import SessionEvent, SessionHeader
from dsh.session.payloads import CancelByUser, TurnMaxSteps
from dsh.settings_tables import AgentOptions, Backend

if TYPE_CHECKING:
    from dsh.agent import Agent
    from dsh.runtime import Runtime
    from dsh.settings import Settings
    from dsh.settings_files import Document

ToolsMode = Literal["recorded", "live"]

HANG_S = 120.0
"""How long a replay may wait for the loop before it is given up: a guard against a
loop that waits for something the recording never gives, not a measure of speed."""


@dataclass
class ReplayOptions:
    tools: ToolsMode = "recorded"
    pace: bool = False
    """Serve chunks with the recorded pauses between them (each at most 2 s)."""
    settings: str = ""
    """The replaying runtime's ``settings.toml`` (its plugins' tables, MCP servers)."""
    foreign: bool = False
    """The settings (and workspace) came in a replay file: somebody else's, so the
    commands they name that would run on the host (hooks) are not run."""
    workspace: dict[str, bytes] | None = None
    """The files to work on with ``--tools live``: the session's first checkpoint."""
    plugins: Sequence[Candidate] = ()
    """More plugins to load (a test's deliberate change)."""
    hang_s: float = HANG_S
    live_after: int | None = None
    """A fork: turns after this one are sent to the model for real."""
    model: str | None = None
    provider: str | None = None


@dataclass
class ReplayRun:
    """What the replaying loop did."""

    recording: Recording
    requests: list[GenerateOptions]
    events: list[SessionEvent]
    cwd: str
    """The scratch folder the agent worked in (gone now): a path that stands for the
    recorded folder wherever it appears."""
    home: str
    unserved: list[str] = field(default_factory=list)
    unapplied: list[str] = field(default_factory=list)
    stopped: str | None = None
    """Why the replay stopped before the end of the recording, if it did."""
    live_after: int | None = None
    live_requests: list[GenerateOptions] = field(default_factory=list)
    """With a fork: the requests sent to the model for real."""
    header: SessionHeader | None = None
    """The replay's own session (a fork is kept from it)."""
    tools: ToolsMode = "recorded"
    stood_in: list[str] = field(default_factory=list)
    """The tools the recording offered that this runtime lacks, offered as recorded."""
    left_out: list[str] = field(default_factory=list)
    """What the settings named that the replay did not run (their hooks)."""


async def replay(recording: Recording, options: ReplayOptions | None = None) -> ReplayRun:
    options = options or ReplayOptions()
    scratch, work = await asyncio.to_thread(_scratch, options, recording.header.cwd)
    try:
        return await _run(recording, options, scratch / "home", work)
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch, True)


def _scratch(options: ReplayOptions, recorded_cwd: str | None) -> tuple[Path, Path]:
    """A folder of its own for the replay: the home and the working folder."""
    root = Path(tempfile.mkdtemp(prefix="dsh-replay-")).resolve()
    (root / "home").mkdir()
    work = _work_folder(root, recorded_cwd)
    work.mkdir(parents=True)
    (root / "home" / "settings.toml").write_text(options.settings)
    if options.tools == "live" and options.workspace:
        _write_files(work, options.workspace.items())
    return root, work


_SEGMENT = 200
"""The longest folder name :func:`_work_folder` makes (a file system allows 255)."""


def _work_folder(root: Path, recorded_cwd: str | None) -> Path:
    """The replay's working folder: a path as long as the recorded one where it can be.
    The report reads one for the other, but the loop measures the prompts it builds
    (compaction's estimate of the context, the output cap it lowers to fit the
    window) and the system prompt names the folder: a path of another length would
    change what those measures come to."""
    remaining = len(recorded_cwd or "") - len(str(root))
    if remaining < len("/work"):
        return root / "work"
    path = root
    while remaining > 0:
        # Each folder costs its name and a slash; never leave a single slash over.
        size = min(remaining - 1, _SEGMENT)
        if remaining - (size + 1) == 1:
            size -= 1
        path /= "w" * size
        remaining -= size + 1
    return path


async def _run(recording: Recording, options: ReplayOptions, home: Path, cwd: Path) -> ReplayRun:
    from dsh.settings import load_settings

    # Only the settings the replay is given: not this machine's Claude Code folder,
    # whose commands, hooks and rules the recording never had (those it had sent what
    # they sent then, from the log).
    environ = {**os.environ, "DSH_CLAUDE_CODE__READ": "false"}
    settings = await asyncio.to_thread(load_settings, home, cwd, environ=environ, trust=True)
    hooks = 0
    if options.foreign:
        settings, hooks = _without_hooks(settings)
    switch = {
        key: value
        for key, value in (("model", options.model), ("provider", options.provider))
        if value is not None
    }
    recorded_cwd = recording.header.cwd
    stand_in = StandIn(
        recording,
        recorded_tools=options.tools == "recorded",
        pace=options.pace,
        live_after=options.live_after,
        switch=switch,
        folder=(str(cwd), recorded_cwd) if recorded_cwd else None,
    )
    stand_in.hang_s = options.hang_s
    run = ReplayRun(recording, stand_in.requests, [], str(cwd), str(home))
    if hooks:
        run.left_out.append(
            f"the replay file's hooks ({hooks}) were not run: they are commands of somebody "
            "else's settings, run on this machine outside any sandbox"
        )
    run.live_requests = stand_in.live_requests
    run.live_after = options.live_after
    run.tools = options.tools

    async def start() -> Runtime:
        from dsh.runtime import start_runtime

        # The recorded machine's facts, so the system prompt is the one recorded
        # wherever the replay runs (a log from before dsh kept them gets this
        # machine's). And the mode the session started in: plan mode is a part of the
        # system prompt.
        runtime = await start_runtime(
            home=home,
            cwd=cwd,
            settings=settings,
            host=recording.header.host,
            permission_mode=recording.start_mode,
            retry_pause=_retry_pause(options.pace),
        )
        if options.plugins:
            await runtime.plugins.load(list(options.plugins))
        stand_in.attach(runtime.root)
        return runtime

    runtime = await start()
    closed = False
    try:
        agent = await runtime.agents.create(cwd, _agent_options(recording, settings.agent))
        stand_in.attach_agent(agent, agent.ctx)
        idle = {point.turns for point in recording.idle_points} | recording.resumes
        session_id = str(agent.session.id)
        try:
            async with asyncio.timeout(options.hang_s):
                for turns in sorted(idle):
                    killed = await _idle_or_killed(agent, stand_in)
                    if turns in recording.resumes:
                        # A new process opened the session there (``dsh -p --resume``):
                        # what the plugins kept in memory starts over, and the agent's
                        # options are the ones a resume takes from the log. After a
                        # kill, its store repairs what the killed runtime left.
                        if killed:
                            stand_in.release()
                        else:
                            await agent.flush()
                        await runtime.aclose()
                        runtime = await start()
                        agent = await runtime.agents.resume(session_id, cwd=cwd)
                        stand_in.attach_agent(agent, agent.ctx)
                    elif killed:
                        break
                    await stand_in.apply_idle(IdlePoint(turns))
                killed = await _idle_or_killed(agent, stand_in)
        except TimeoutError:
            run.stopped = f"the replay waited {options.hang_s:g} s for the loop and stopped"
            killed = stand_in.dead.is_set()
            if not killed:
                agent.cancel(CancelByUser())
                await agent.when_idle()
        if killed:
            # The log ends with the kill, as the recording's does: read as a later
            # open would find it, repaired in memory, as the recording was read.
            closed = True
            stand_in.release()
            await runtime.aclose()
            header, run.events = await _stored(home, settings.storage.backend, session_id)
            run.header = header
        else:
            await agent.flush(sync=False)
            run.events = list(agent.session.events)
            run.header = agent.session.header
    finally:
        if not closed:
            stand_in.release()
            await runtime.aclose()
    run.stood_in = list(stand_in.stood_in)
    run.unserved = [
        *stand_in.unserved,
        *(f"a command said: {line}" for line in stand_in.host.shown),
    ]
    run.unapplied = [
        f"inputs at {point} were never due: the replay did not get there"
        for point in recording.inputs
        if point not in stand_in.applied
    ]
    return run


async def _idle_or_killed(agent: Agent, stand_in: StandIn) -> bool:
    """Wait until the agent is idle, or its runtime reached a point where the recorded
    process was killed (True): a killed process's loop never gets idle."""
    idle = asyncio.ensure_future(agent.when_idle())
    killed = asyncio.ensure_future(stand_in.dead.wait())
    try:
        await asyncio.wait((idle, killed), return_when=asyncio.FIRST_COMPLETED)
    finally:
        idle.cancel()
        killed.cancel()
    return stand_in.dead.is_set()


async def _stored(
    home: Path, backend: Backend, session_id: str
) -> tuple[SessionHeader, list[SessionEvent]]:
    """The session as the replay stored it, with crash repair's closing events (read
    only: nothing is written)."""
    from dsh.session import SessionStore

    store = SessionStore.at(home, backend)
    try:
        loaded = await store.persistence.inspect(SessionId(session_id))
    finally:
        await store.aclose()
    return loaded.header, list(loaded.events)


def _without_hooks(settings: Settings) -> tuple[Settings, int]:
    """``settings`` without any ``[[hooks.*]]``, and how many there were. A hook is a
    command run on the host, outside the sandbox: a file a bug report brought must not
    get one run by being looked at. With recorded tools what they did still comes from
    the log (the context they added, the results of the calls they stopped); steering
    a Stop hook queued does not, and that replay differs where it would have come."""
    found = settings.merged.get("hooks")
    count = (
        sum(len(g) for g in found.values() if isinstance(g, list)) if isinstance(found, dict) else 0
    )

    def without(values: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in values.items() if key != "hooks"}

    def document(doc: Document) -> Document:
        return dataclasses.replace(doc, values=without(doc.values))

    project = settings.project_document
    stripped = dataclasses.replace(
        settings,
        documents=tuple(document(d) for d in settings.documents),
        merged=without(settings.merged),
        own=without(settings.own),
        own_documents=tuple(document(d) for d in settings.own_documents),
        project_document=document(project) if project is not None else None,
        claude_documents=tuple(document(d) for d in settings.claude_documents),
    )
    return stripped, count


def _retry_pause(pace: bool) -> Callable[[float], Awaitable[None]]:
    """The wait before a retry: the replaying dsh's own delay with recorded pacing (at
    most :data:`PACE_CAP_S`), none without it (the failures are served at once)."""

    async def pause(seconds: float) -> None:
        await asyncio.sleep(min(seconds, PACE_CAP_S) if pace else 0)

    return pause


def _agent_options(recording: Recording, defaults: AgentOptions) -> AgentOptions:
    """The options the recorded session's first request was made with, as far as the
    log says them (what the adapter filled in, or a listener adjusted, is left to them
    again)."""
    first = recording.first_header
    if first is None:
        return defaults
    config = first.config
    filled = {**(first.adapter_defaults or {}), **(first.adjusted or {})}
    # A step limit given on the command line (--max-steps) is in the log only where a
    # turn reached it.
    limits = [
        end.reason.limit for end in recording.turn_ends if isinstance(end.reason, TurnMaxSteps)
    ]
    return defaults.model_copy(
        update={
            "max_steps": limits[0] if limits else defaults.max_steps,
            "provider": config.provider,
            "model": config.model,
            "reasoning_effort": None if filled.get("reasoningEffort") else config.reasoning_effort,
            "max_tokens": None if filled.get("maxTokens") else config.max_tokens,
            "temperature": None if filled.get("temperature") else config.temperature,
        }
    )


def _write_files(root: Path, files: Iterable[tuple[str, bytes]]) -> None:
    for name, data in files:
        target = (root / name).resolve()
        if not target.is_relative_to(root):
            raise ValueError(f"a workspace file outside the workspace: {name!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
