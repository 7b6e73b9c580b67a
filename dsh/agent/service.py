"""The ``agents`` service: creating, resuming and disposing agents."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from dsh.agent.agent import Agent
from dsh.agent.hooks import AGENT_CREATED, AGENT_DISPOSED, AGENT_SESSION_END, AGENT_SESSION_START
from dsh.agent.turn import AgentServices
from dsh.agent_handle import AgentHandle, RewindError
from dsh.checkpoints.service import CHECKPOINTS
from dsh.kernel import Context, ServiceKey
from dsh.llm import LlmService
from dsh.prompt import PromptService
from dsh.session import RestoreDone, RestoreStarted, Session, SessionStore
from dsh.session.payloads import HistoryRewound, SessionMoved, TurnStart
from dsh.settings_tables import AgentOptions
from dsh.tools import ToolService
from dsh.tools.files import WORKSPACE_FILES

_log = logging.getLogger("dsh.agent")

Setup = Callable[[Context], Awaitable[None] | None]


class AgentService:
    def __init__(
        self,
        root: Context,
        *,
        llm: LlmService,
        tools: ToolService,
        prompt: PromptService,
        sessions: SessionStore,
        defaults: AgentOptions | None = None,
    ) -> None:
        self._root = root
        self.services = AgentServices(root, llm, tools, prompt)
        """What every agent here works with."""
        self._sessions = sessions
        self.defaults = defaults or AgentOptions()
        self._agents: dict[str, Agent] = {}

    async def create(
        self, cwd: Path, options: AgentOptions | None = None, *, setup: Setup | None = None
    ) -> Agent:
        """An agent on a new session in ``cwd``."""
        options = options or self.defaults
        session = await self._sessions.create(str(cwd), model=options.model)
        return await self._start(session, options, cwd, "startup", setup)

    async def delegate(
        self,
        parent: AgentHandle,
        options: AgentOptions,
        *,
        preset: str | None = None,
        label: str | None = None,
        setup: Setup | None = None,
    ) -> Agent:
        """A subagent of ``parent``: an agent on a new session in the parent's working
        directory whose header links it to the parent's (``origin`` "subagent", one
        level deeper, ``preset`` the profile it runs). ``label`` names it to the person
        (approval dialogs say which agent asks). Dispose of it like any other."""
        header = parent.session.header
        session = await self._sessions.create(
            str(parent.cwd),
            model=options.model,
            parent=parent.id,
            origin="subagent",
            delegation_depth=header.delegation_depth + 1,
            agent_preset=preset,
        )
        files = parent.ctx.get(WORKSPACE_FILES, None)

        async def set_up(ctx: Context) -> None:
            # A subagent reads and changes the files its parent sees: where a front end
            # stands in for the disk (an editor's buffers), for the child too.
            if files is not None and not files.on_disk:
                ctx.provide(WORKSPACE_FILES, files)
            if setup is not None:
                result = setup(ctx)
                if result is not None:
                    await result

        return await self._start(
            session, options, parent.cwd, "subagent", set_up, label=label, parent=parent
        )

    async def resume(
        self,
        session_id: str,
        options: AgentOptions | None = None,
        *,
        cwd: Path | None = None,
        setup: Setup | None = None,
        wait: bool = False,
    ) -> Agent:
        """An agent continuing a stored session (by id or unique prefix), working in
        ``cwd`` (None: the process's working directory), never in the folder its log
        names. Its provider and model are the session's last ones unless ``options``
        says otherwise. Raises :class:`~dsh.session.SessionBusyError` when another
        process writes the session, or with ``wait`` waits until it lets the session go."""
        session = await self._sessions.open(session_id, wait=wait)
        opened_at = len(session.events)
        approvals = self.services.tools.approvals
        if approvals is not None:
            # At once, not at the first tool call: the person hears of grants that no
            # longer hold when the session opens, even if no tool is ever called.
            approvals.restore(session)
        agent = await self._continue(session, options, setup, opened_at, cwd)
        checkpoints = self._root.get(CHECKPOINTS, None)
        if checkpoints is not None:
            # A restore a kill cut short is finished before anything else runs, and
            # so is the rewind of the conversation that was to follow it.
            await checkpoints.finish_interrupted(agent)
            _finish_rewind(agent)
        return agent

    async def fork(
        self,
        session_id: str,
        options: AgentOptions | None = None,
        *,
        cwd: Path | None = None,
        setup: Setup | None = None,
        at_turn: int | None = None,
    ) -> Agent:
        """An agent on a new session that continues a stored one (by id or unique
        prefix) from its last finished turn (``at_turn``: from the end of that turn),
        working in ``cwd`` as :meth:`resume` does; the stored one is only read, so
        this works while another process writes it. Raises ``ForkError`` saying why
        it cannot fork there."""
        cwd = (cwd or Path.cwd()).resolve()
        session = await self._sessions.fork(session_id, cwd=str(cwd), at_turn=at_turn)
        # What the fork logged after the copied events (session/moved) is news: shown.
        opened_at = session.header.seed_length or len(session.events)
        return await self._continue(session, options, setup, opened_at, cwd)

    async def _continue(
        self,
        session: Session,
        options: AgentOptions | None,
        setup: Setup | None,
        opened_at: int,
        cwd: Path | None,
    ) -> Agent:
        """An agent on a session that already holds a conversation: with the session's
        last provider and model unless ``options`` says otherwise. It works in ``cwd``:
        a log is a file anyone can write or import, so the folder its header names
        decides nothing (that folder, when another, is said in ``session/moved``)."""
        if options is None:
            header = session.request_header()
            options = self.defaults
            if header is not None:
                options = options.model_copy(
                    update={"provider": header.config.provider, "model": header.config.model}
                )
        cwd = (cwd or Path.cwd()).resolve()
        stored = session.header.cwd
        if stored is not None and stored != str(cwd):
            session.append("session/moved", SessionMoved(stored=stored, cwd=str(cwd)))
        agent = await self._start(session, options, cwd, "resume", setup, opened_at)
        agent.inbox.restore(session.inbox_events())
        return agent

    async def _start(
        self,
        session: Session,
        options: AgentOptions,
        cwd: Path,
        source: str,
        setup: Setup | None,
        opened_at: int | None = None,
        *,
        label: str | None = None,
        parent: AgentHandle | None = None,
    ) -> Agent:
        agent = Agent(
            self.services,
            session,
            self._sessions.sink(session),
            options=options,
            cwd=cwd,
            opened_at=opened_at,
            label=label,
            parent=parent,
        )
        if setup is not None:
            result = setup(agent.ctx)
            if result is not None:
                await result
        self._agents[agent.id] = agent
        self._root.emit(AGENT_CREATED, agent)
        await self._root.parallel(AGENT_SESSION_START, agent, source)
        return agent

    def get(self, agent_id: str) -> Agent | None:
        return self._agents.get(agent_id)

    def list(self) -> list[Agent]:
        return list(self._agents.values())

    async def dispose(self, agent: Agent, reason: str = "other") -> None:
        """Stop the agent, undo its scope, and make its session durable. Once: a
        subagent is disposed of by the call that made it, which may be while
        :meth:`aclose` disposes of its parent and has it on its list. ``reason`` is
        why its session ends, for ``agent/session-end`` (see :mod:`dsh.hooks`)."""
        if self._agents.get(agent.id) is not agent:
            return
        try:
            # Awaited while the agent still stands: its listeners may log in its session.
            await self._root.parallel(AGENT_SESSION_END, agent, reason)
        except Exception:
            _log.warning(
                "session %s: an agent/session-end listener failed", agent.id, exc_info=True
            )
        await agent.dispose()
        self._agents.pop(agent.id, None)
        await self._sessions.close(agent.session)
        self._root.emit(AGENT_DISPOSED, agent)

    async def aclose(self) -> None:
        for agent in list(self._agents.values()):
            await self.dispose(agent)


def _finish_rewind(agent: Agent) -> None:
    """The conversation's rewind that the session's last restore was to be followed by,
    if the process stopped before it was logged (nothing has run since). A restore that
    failed was followed by none: ``/rewind`` stopped there."""
    failed: set[str] = set()
    kinds = ("turn/start", "history/rewound", "checkpoint/restoring", "checkpoint/restored")
    for event in agent.session.scan_back(*kinds):
        match event.data:
            case TurnStart() | HistoryRewound():
                return  # it was logged, or the session went on: nothing left to do
            case RestoreDone(error=str(), restore_id=restore_id):
                failed.add(restore_id)
            case RestoreStarted(restore_id=restore_id) if restore_id in failed:
                return
            case RestoreStarted(conversation=True, turn=turn, restore_id=restore_id):
                try:
                    agent.rewind(turn, restore_id=restore_id)
                except RewindError as error:
                    _log.warning("session %s: the rewind was not finished: %s", agent.id, error)
                return
            case RestoreStarted():
                return


AGENTS: ServiceKey[AgentService] = ServiceKey("agents")
"""Creating, resuming and disposing agents."""
