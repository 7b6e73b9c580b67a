"""The session controller: what every front end does with sessions, written once.

The TUI, plain mode and ``dsh -p`` differ in how they draw a session and how they
ask the person. The rest is here, the same for all three: starting the runtime (the
project's trust settled first), opening the first session from the command-line
choices (and what to do with one another dsh writes), switching sessions (``/new``,
``/resume``), taking what the person sends (a slash command, else a message for the
agent), answering the approvals and questions services through the front end's
dialogs, and reporting errors one way: a start-up that cannot go on raises
:class:`StartFailed`, whose message is the one line to print (``dsh: …``); anything
later is a line the front end shows at ``error`` level.

A front end implements :class:`UserInterface` (render, ask, read input) and owns one
:class:`SessionController`, which is the :class:`~dsh.commands.CommandHost` of every
command it runs.

The module imports nothing heavy when it loads (the TUI paints its first frame
before pydantic and the runtime are imported): those come in the methods that use
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dsh.bulk import start_up_done
from dsh.ui.opening import NothingToContinue, after_busy, open_agent
from dsh.ui.session_commands import ago, register_session_commands
from dsh.ui.user_interface import SessionChoice, UserInterface

if TYPE_CHECKING:
    from dsh.agent import Agent, AgentHandle, MentionChoice
    from dsh.commands import CommandView
    from dsh.kernel import Context
    from dsh.runtime import Runtime
    from dsh.sandbox import SandboxStatus
    from dsh.session import SessionBusyError
    from dsh.settings import Settings
    from dsh.tools.questions import Answer, Question
    from dsh.ui.rewinding import RewindAsker

_log = logging.getLogger(__name__)

MENTIONS_TIMEOUT = 2.0
"""Seconds the plugins have to offer ``@`` choices."""
CLOSE_TIMEOUT = 10.0
"""Seconds a running turn has to end, once cancelled, before its agent is disposed."""
RECENT_SESSIONS = 10
"""Sessions :meth:`SessionController.choose_recent_session` lists."""

SlashOutcome = Literal["ran", "refused", "not-a-command"]
"""What :meth:`SessionController.run_slash` made of a text."""

_SAID: set[str] = set()
"""The start-up warnings this process has said: ``dsh acp`` runs a controller (and a
runtime) per editor session, and the person is told once, not once a session."""


class StartFailed(Exception):
    """Start-up cannot go on. ``str(error)`` is the one line that says why
    (``dsh: …``); the front end prints it where its errors go and exits with 1."""


class SessionController:
    """One front end's sessions, from start-up to close, and the
    :class:`~dsh.commands.CommandHost` of the commands it runs.

    The steps, in order: :meth:`start` (runtime and wiring), :meth:`open_first`, then
    :meth:`submit` for each thing sent, and :meth:`close` at the end."""

    def __init__(
        self,
        ui: UserInterface,
        choice: SessionChoice,
        *,
        runtime: Runtime | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """``runtime``: one already started, used as it is and left open (tests,
        embedding); otherwise :meth:`start` starts one and :meth:`close` stops it.
        ``options``: more agent options for the first session (``max_steps``)."""
        self.ui = ui
        self.choice = choice
        self.cwd = (choice.cwd or Path.cwd()).resolve()
        self.runtime: Runtime | None = runtime
        self._owns_runtime = runtime is None
        self._options = options
        self.agent: Agent | None = None
        """The agent of the session on screen."""
        self.read_only: SessionBusyError | None = None
        """Set when the person chose only to read a session another dsh writes."""
        self.resumable: str | None = None
        """The session last shown, once closed, if anything was said in it (and
        stored: there is something to resume)."""
        self.unsaved: list[str] = []
        """What this run could not store: a line for each session it closed with events
        its storage lacks, or one of whose turns a failing write stopped. A front end
        that ends with any says them and exits with 1."""
        self._ctx: Context | None = None
        self._commands: CommandView | None = None
        self._closing = False
        self._sent_now: set[str] = set()
        """Inbox items of messages sent to go at once that went to the queue (no turn
        ran yet): while one waits, a new message queues behind it, never steers."""
        self._closed = asyncio.Event()
        self._settings: Settings | None = choice.settings
        self._shell_signals: set[asyncio.Event] = set()
        """What stops each ``!`` command still running."""
        self.rewind_asker: RewindAsker | None = None
        """How ``/rewind`` asks in this front end, when it has a way of its own (the
        TUI's picker screen); None: numbered lists through :meth:`choose`, or, where
        nobody can be asked, nothing (the command line says it all)."""

    @property
    def ctx(self) -> Context:
        """The front end's own context: what it registers there goes at :meth:`close`."""
        assert self._ctx is not None, "the controller is not started"
        return self._ctx

    @property
    def commands(self) -> CommandView:
        """The commands service as the front end's context sees it."""
        assert self._commands is not None, "the controller is not started"
        return self._commands

    def _runtime(self) -> Runtime:
        assert self.runtime is not None, "the controller is not started"
        return self.runtime

    # ------------------------------------------------------------------ start-up

    async def start(self) -> None:
        """Settle the project's trust and start the runtime (unless one was given),
        then wire the front end to it: its context, its approver and answerer.
        Raises :class:`StartFailed`."""
        from dsh.checkpoints.commands import undo_command
        from dsh.commands import COMMANDS
        from dsh.tools.approval import APPROVALS
        from dsh.tools.questions import QUESTIONS
        from dsh.ui.rewinding import register_rewind

        if self.runtime is None:
            try:
                self.runtime = await self._start_runtime()
            finally:
                # The front end paused the collector for the imports (dsh.bulk): what
                # they built lives on; what comes next is the session's own work.
                start_up_done()
        runtime = self.runtime
        self._ctx = runtime.root.child(name=self.ui.kind)
        self._commands = self._ctx.get(COMMANDS)
        # Every front end's, dsh -p's and dsh acp's as well: where nobody can be asked,
        # the command line is the confirmation.
        self._commands.register("undo", undo_command())
        register_rewind(self._commands, self._rewind_asker)
        if self.ui.answers:
            self._ctx.get(APPROVALS).add_approver(self.ui.ask_approval)
            self._ctx.get(QUESTIONS).set_answerer(self._answer)
            self._ctx.get(APPROVALS).add_plan_reviewer(self.ui.ask_plan)

    def _rewind_asker(self) -> RewindAsker:
        from dsh.ui.rewinding import ChoosingAsker

        if self.rewind_asker is not None:
            return self.rewind_asker
        return ChoosingAsker(self.choose, self.ui.show, attended=lambda: self.ui.attended)

    @property
    def home(self) -> Path:
        """dsh's own folder."""
        from dsh.paths import dsh_home

        return self.choice.home or dsh_home()

    async def settings(self) -> Settings:
        """The settings of this process as loaded: the front end's
        (:attr:`SessionChoice.settings`), else read here, once. Not yet checked nor
        settled; :meth:`start` does both and hands them to the runtime.
        Raises :class:`~dsh.settings.SettingsError`."""
        if self._settings is None:
            from dsh.settings import load_settings

            trust = True if self.choice.trust else None
            self._settings = await asyncio.to_thread(
                load_settings, self.home, self.cwd, check=False, trust=trust
            )
        return self._settings

    async def _start_runtime(self) -> Runtime:
        from dsh.kernel import discover
        from dsh.runtime import start_runtime
        from dsh.settings import SettingsError, load_settings
        from dsh.ui.trusting import settle

        choice = self.choice
        home = self.home
        try:
            settings = await settle(await self.settings(), home, ask=self.ui.ask_trust)
            # The plugins' modules imported off the loop (the TUI's prompt stays live
            # meanwhile), once: the setup's forms and the runtime read this discovery.
            await asyncio.to_thread(discover, settings.plugin_modules())
            set_up = await self.ui.set_up(home, settings)
            if set_up is False:
                raise StartFailed("dsh: no model configured; nothing to do.")
            if set_up:
                # The setup wrote the user's settings file: the one time it is read again.
                settings = await asyncio.to_thread(
                    load_settings, home, self.cwd, trust=settings.trusted
                )
            self._settings = settings
            self.ui.show_ignored(settings)
            return await start_runtime(
                home=home,
                cwd=self.cwd,
                plugin_configs=choice.plugin_configs,
                permission_mode=choice.permission_mode,
                sandbox=choice.sandbox,
                settings=settings,
            )
        except SettingsError as error:
            raise StartFailed(f"dsh: {error}") from None

    async def sandbox_status(self) -> SandboxStatus:
        """Whether the sandbox works here, learned once (its probe runs in a thread and
        starts a bwrap: a front end asks once its UI is up, never on the way to its
        first paint). The first time this process learns that commands will not be
        contained as asked, the front end says why (:meth:`UserInterface.show_warning`)."""
        from dsh.sandbox.service import SANDBOX

        status = await self.ctx.get(SANDBOX).ready()
        warning = status.warning()
        if warning is not None and warning not in _SAID:
            _SAID.add(warning)
            self.ui.show_warning(warning)
        return status

    async def _answer(self, questions: Sequence[Question], agent: Any) -> list[Answer] | None:
        return await self.ui.ask_questions(questions)

    async def open_first(self, *, new_if_none: bool = False) -> bool:
        """Open the session the command line chose: the one the person picks
        (``pick``), ``resume`` (an id or prefix), the latest of the folder
        (``continue_last``), else a new one. ``new_if_none``: with nothing to continue,
        say so and start a new session instead of failing.

        A session another dsh writes: the person's :meth:`Dialogs.ask_busy` choice.
        False when nothing was opened because the person picked nothing; raises
        :class:`StartFailed` when nothing could be."""
        from dsh.session import PersistenceError, SessionBusyError

        choice = self.choice
        resume = choice.resume
        if choice.pick:
            resume = await self.ui.pick_session()
            if resume is None:
                return False
        opened = functools.partial(
            open_agent,
            self._runtime(),
            self.cwd,
            model=choice.model,
            provider=choice.provider,
            effort=choice.effort,
            options=self._options,
        )
        try:
            try:
                agent, resumed = await opened(
                    resume=resume,
                    continue_last=choice.continue_last and resume is None,
                    fork=choice.fork,
                    wait=choice.wait,
                )
            except NothingToContinue as error:
                if not new_if_none:
                    raise
                said = str(error)
                self.ui.show(f"{said[:1].upper()}{said[1:]}. Starting a new one.", level="warning")
                agent, resumed = await opened()
            except SessionBusyError as busy:
                picked = await self.ui.ask_busy(busy)
                if picked is None:
                    raise StartFailed(f"dsh: {busy}") from None
                if picked == "read":
                    await self._show_read_only(busy)
                    return True
                agent, resumed = await opened(**after_busy(picked, busy.session_id))
        except (LookupError, ValueError, OSError, PersistenceError) as error:
            raise StartFailed(f"dsh: {error}") from None
        await self._attach(agent, replay=resumed)
        return True

    async def _show_read_only(self, busy: SessionBusyError) -> None:
        from dsh.llm import SessionId

        stored = SessionId(busy.session_id)
        loaded = await self._runtime().sessions.persistence.inspect(stored)
        self.read_only = busy
        await self.ui.show_read_only(loaded.events)

    # ------------------------------------------------------------------ the session on screen

    async def _attach(self, agent: Agent, *, replay: bool) -> None:
        from dsh.frontend import shown_in  # the kernel: loaded after the first frame

        # Plugins may treat a person and a script apart, and start the client's servers.
        shown_in(agent.ctx, self.ui.kind, self.choice.tool_servers)
        self.agent = agent
        await self.ui.attach(agent, replay=replay)

    async def _detach(self, reason: str) -> None:
        agent, self.agent = self.agent, None
        self.ui.detach()
        if agent is not None and self.runtime is not None:
            await close_agent(self.runtime, agent, reason)
            stored = self.runtime.sessions.stored(agent.session)
            self.resumable = agent.id if agent.session.last_turn > 0 and stored else None
            problem = storage_problem(self.runtime, agent)
            if problem is not None:
                self.unsaved.append(problem)

    def running(self) -> bool:
        """Whether a turn of the session on screen runs."""
        return self.agent is not None and self.agent.status != "idle"

    # ------------------------------------------------------------------ input

    async def submit(self, text: str, *, queue: bool = False) -> bool:
        """What the person sent: a slash command (run it), a ``!`` shell command
        (:meth:`run_shell`), else a message for the agent, which steers the running
        turn, or (``queue``, or no turn running) waits for a turn of its own. True
        when a message went to the agent."""
        from dsh.agent.user_shell import shell_command
        from dsh.llm import user_text

        text = text.strip()
        if not text:
            return False
        if self.read_only is not None:
            self.ui.show(f"Nothing is sent: {self.read_only}", level="warning")
            return False
        agent = self.agent
        if agent is None:
            return False
        if await self.run_slash(text) != "not-a-command":
            return False
        command = shell_command(text)
        if command is not None:
            return await self.run_shell(command)
        message = user_text(text)
        # A message sent to go now that still waits for its turn (sent just before the
        # turn started) is not overtaken by one steering that turn: Enter, Enter, Enter
        # as a turn starts keep their order. Follow-ups queued on purpose (Tab) are.
        waiting = {item.id for item in agent.inbox.queued} & self._sent_now
        self._sent_now &= waiting
        if self.running() and not queue and not waiting:
            agent.steer(message)
        else:
            item = agent.followup(message)
            if item is not None and not queue:
                self._sent_now.add(item.id)
        return True

    async def run_shell(self, command: str) -> bool:
        """``!command``: run it as the model's commands run (see
        :mod:`dsh.agent.user_shell`); returns when it has ended and is logged. True
        when it ran (or was refused) and the model will read it. While a turn runs it
        waits for the turn's end: run at once, it would reach the log only when the
        turn's next step took it, and its card with it."""
        from dsh.agent.user_shell import run_user_command

        agent = self.agent
        if agent is None:
            return False
        if not command:
            self.ui.show("Type a command after ! to run it (as in !git status).", level="error")
            return False
        if self.running():
            self.ui.show(f"!{command} runs when this turn ends.")
            await agent.when_idle()
            if self._closing or agent is not self.agent:
                return False  # the session closed or changed meanwhile: not run
        stop = asyncio.Event()
        self._shell_signals.add(stop)
        try:
            await run_user_command(agent, command, stop)
        except Exception as error:  # logging it failed: said, not raised into the UI
            self.ui.show(f"!{command} failed: {error}", level="error")
            return False
        finally:
            self._shell_signals.discard(stop)
        return True

    def stop_shell(self) -> bool:
        """Stop the ``!`` commands that run (Esc, Ctrl+C); False when none does."""
        for stop in self._shell_signals:
            stop.set()
        return bool(self._shell_signals)

    async def run_slash(self, text: str) -> SlashOutcome:
        """The send policy for a slash command, one for every front end: ``/name`` runs
        the command of that name (``ran``); a ``/word`` no command has is refused, and
        never goes to the model as text (``refused``: said with :func:`unknown_command`,
        which names the plugins that failed to load, whose commands may be missing);
        anything else is ``not-a-command``, a message for the agent."""
        from dsh.commands import parse_command

        parsed = parse_command(text)
        if parsed is None:
            return "not-a-command"
        if await self.run_command(text):
            return "ran"
        from dsh.commands import COMMANDS_SETTLE

        runtime = self._runtime()
        # A command still coming (an MCP server's prompt, its server starting) is
        # waited for before the word is called unknown.
        await runtime.root.parallel(COMMANDS_SETTLE)
        if await self.run_command(text):
            return "ran"
        failed = [record.name for record in runtime.plugins.records if record.status == "failed"]
        self.ui.show(unknown_command(parsed[0], failed), level="error")
        return "refused"

    async def run_command(self, text: str) -> bool:
        """Run ``text`` as a slash command; False when it names none (nothing is said).
        A failure is shown: a recorded command's in its ``command/done`` event, any
        other here."""
        from dsh.commands import CommandContext, parse_command

        parsed = parse_command(text)
        if parsed is None or self.agent is None:
            return False
        context = CommandContext(agent=self.agent, root=self._runtime().root, host=self)
        try:
            return await self.commands.run(text, context)
        except Exception as error:  # storing what it did failed: said, not raised into the UI
            self.ui.show(f"/{parsed[0]} failed: {error}", level="error")
            return True

    async def mentions(self, query: str) -> list[MentionChoice]:
        """What the plugins offer for an ``@query`` being typed, besides the project's
        files: none when a plugin fails or takes longer than :data:`MENTIONS_TIMEOUT`
        (the menu must not wait on a server that hangs)."""
        from dsh.agent.hooks import PROMPT_MENTIONS

        agent = self.agent
        if agent is None or self.runtime is None:
            return []
        try:
            offered = await asyncio.wait_for(
                self.runtime.root.parallel(PROMPT_MENTIONS, agent, query), MENTIONS_TIMEOUT
            )
        except Exception:
            _log.warning("no @mention choices from the plugins", exc_info=True)
            return []
        return [choice for choices in offered for choice in choices]

    # ------------------------------------------------------------------ CommandHost

    def show(self, text: str, *, level: str = "info") -> None:
        self.ui.show(text, level=level)

    async def new_session(self) -> None:
        """``/new``: a fresh session in place of the one on screen, with its options."""
        from dsh.commands import CommandError

        if self.ui.one_session:
            raise CommandError("headless runs start a new session unless --resume or --continue")
        runtime = self._runtime()
        options = self.agent.options if self.agent is not None else None
        await self._detach("clear")
        await self._attach(await runtime.agents.create(self.cwd, options), replay=False)

    async def open_session(self, session_id: str | None) -> None:
        """``/resume [ID]``: the session ``session_id`` names (an id or a prefix; None:
        the one the person picks) in place of the one on screen. One that cannot be
        resumed is reported, and a new session takes the screen."""
        from dsh.commands import CommandError
        from dsh.session import PersistenceError

        if self.ui.one_session:
            raise CommandError("headless, open a session with --resume ID or --continue")
        runtime = self._runtime()
        if session_id is None:
            session_id = await self.ui.pick_session()
            if session_id is None:
                return
        try:
            resolved = await runtime.sessions.resolve(session_id)
        except LookupError as error:
            raise CommandError(str(error)) from None
        if self.agent is not None and resolved == self.agent.id:
            self.ui.show("That is the session on screen.")
            return
        await self._detach("resume")
        try:
            agent = await runtime.agents.resume(resolved, cwd=self.cwd)
        except (LookupError, ValueError, OSError, PersistenceError) as error:
            self.ui.show(f"Could not resume {resolved}: {error}", level="error")
            await self.new_session()
            return
        await self._attach(agent, replay=True)

    async def fork_session(self, turn: int | None, *, code: bool = False) -> None:
        """``/fork [TURN] [--code]``: a new session holding the conversation on screen
        through the end of turn ``turn`` (None: its last finished turn), opened in its
        place as ``/resume`` opens one. The session on screen is kept as it is; one
        that cannot be forked there is an error that changes nothing. With ``code``
        the files go back to how the agent left them at that turn's end too, after the
        summary is shown and confirmed (the restore is logged in the fork)."""
        from dsh.commands import CommandError
        from dsh.session import ForkError, PersistenceError

        if self.ui.one_session:
            raise CommandError("headless, fork with: dsh sessions fork ID [--at TURN]")
        agent = self.agent
        if agent is None:
            raise CommandError("no session on screen to fork")
        if agent.status != "idle":
            raise CommandError("a turn is running: /fork once it has ended")
        runtime = self._runtime()
        # The fork is made from storage: everything on screen goes there first.
        if not await agent.flush():
            raise CommandError("this session could not be written, so it cannot be forked yet")
        try:
            forked = await runtime.agents.fork(
                str(agent.id), agent.options, cwd=self.cwd, at_turn=turn
            )
        except (ForkError, LookupError, OSError, PersistenceError) as error:
            raise CommandError(str(error)) from None
        source = agent.id
        restored = await self._restore_for_fork(forked, agent) if code else None
        await self._detach("resume")
        await self._attach(forked, replay=True)
        where = f"turn {turn}" if turn is not None else "its last finished turn"
        self.ui.show(
            f"Forked session {source[:8]} at {where}: this is the new session "
            f"{forked.id[:8]}. The original is kept (/resume {source[:8]} to go back)."
        )
        if restored is not None:
            self.ui.show(restored)

    async def _restore_for_fork(self, forked: AgentHandle, source: AgentHandle) -> str:
        """Put the files back as the fork's last turn left them; what was done, said."""
        from dsh.checkpoints import CheckpointError
        from dsh.checkpoints.commands import restore_fork_files
        from dsh.checkpoints.service import CHECKPOINTS

        checkpoints = self._runtime().root.get(CHECKPOINTS, None)
        if checkpoints is None:
            return "Checkpoints are not available in this dsh: the files were left as they are."

        async def confirm() -> bool:
            picked = await self.ui.choose(
                "Restore these files in the fork?", ["Restore the files", "Leave them"], current=0
            )
            return picked == 0

        try:
            return await restore_fork_files(
                checkpoints, forked, source.session.events, show=self.ui.show, confirm=confirm
            )
        except CheckpointError as error:
            return f"The files were not restored: {error}"

    async def quit(self) -> None:
        await self.ui.quit()

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        return await self.ui.choose(title, items, current=current)

    @property
    def attended(self) -> bool:
        return self.ui.attended

    # ------------------------------------------------------------------ commands

    def add_session_commands(self, keys: str, status_line: Callable[[], str | None]) -> None:
        """The commands of an interactive front end (``/new``, ``/resume``, ``/fork``,
        ``/status``, ``/help``, ``/quit``: see
        :func:`~dsh.ui.session_commands.register_session_commands`); ``status_line`` is
        the front end's one line on the session on screen, which ``/status`` says (the
        front end draws it: the controller knows no renderer). (``/undo`` and
        ``/rewind``, which every front end has, are registered by :meth:`start`.)"""
        register_session_commands(self, keys, status_line)

    async def choose_recent_session(
        self, choose: Callable[[str, Sequence[str]], Awaitable[int | None]]
    ) -> str | None:
        """The folder's recent sessions, newest first, offered with ``choose`` (title,
        items: the index picked, or None): the id of the one picked. For a front end
        without a session picker of its own."""
        from dsh.commands import CommandError

        sessions = self._runtime().sessions
        catalog = sessions.catalog
        if catalog is None:
            raise CommandError("no session catalog to list sessions from; give an id")
        await sessions.index_missing()
        recent = await catalog.list(cwd=str(self.cwd), limit=RECENT_SESSIONS)
        if not recent:
            self.ui.show(f"No sessions in {self.cwd} yet.")
            return None
        now = time.time()
        current = self.agent.id if self.agent is not None else None
        items = [
            f"{entry.display_title} · {entry.turns} turn{'' if entry.turns == 1 else 's'} · "
            f"{ago(entry.updated_at, now)} · "
            f"{entry.id[:8]}" + (" (this one)" if entry.id == current else "")
            for entry in recent
        ]
        picked = await choose("Recent sessions here:", items)
        return recent[picked].id if picked is not None else None

    # ------------------------------------------------------------------ the end

    async def close(self, reason: str = "other") -> None:
        """Close the session on screen (a running turn cancelled first), drop what the
        front end registered, and stop the runtime if :meth:`start` started it. Once:
        a second call (the TUI closes on quit and again as it unmounts) returns when
        the first is done. ``reason``: why the session ends (``agent/session-end``)."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        for stop in self._shell_signals:  # a ! command still running ends with the session
            stop.set()
        try:
            await self._detach(reason)
            if self._ctx is not None:
                await self._ctx.dispose()  # the approver, the answerer, the commands added
            if self.runtime is not None and self._owns_runtime:
                await self.runtime.aclose()
        finally:
            self._closed.set()


async def close_agent(runtime: Runtime, agent: Agent, reason: str = "other") -> None:
    """Cancel its turn (waiting for the turn's closing events), then dispose of it."""
    from dsh.session.payloads import CancelByUser

    if agent.status != "idle":
        agent.cancel(CancelByUser())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(agent.when_idle(), CLOSE_TIMEOUT)
    await runtime.agents.dispose(agent, reason)


def storage_problem(runtime: Runtime, agent: AgentHandle, since: int | None = None) -> str | None:
    """Why a session's run is not all stored, or None: events its storage lacks, or a
    turn stopped because its log could not be written (since stored or not). The turns
    looked at are those logged from seq ``since`` (default: since the agent opened the
    session)."""
    from dsh.session import TurnEnd, TurnFailed
    from dsh.session.writer import SESSION_WRITE_FAILED, unstored_message

    sessions, session = runtime.sessions, agent.session
    stored = sessions.stored(session)
    if stored < len(session.events):
        return unstored_message(agent.id, sessions.write_error(session), stored)
    for event in reversed(session.events[agent.opened_at if since is None else since :]):
        data = event.data
        if (
            isinstance(data, TurnEnd)
            and isinstance(data.reason, TurnFailed)
            and data.reason.error.code == SESSION_WRITE_FAILED
        ):
            # Its own message said what to do then; storage has since caught up.
            return (
                f"turn {data.turn} stopped because the session log could not be written "
                f"then; all of it is stored now: resume the session {agent.id}"
            )
    return None


def unknown_command(name: str, failed_plugins: Sequence[str] = ()) -> str:
    """What every front end says to a ``/name`` no command has."""
    said = f"Unknown command /{name} (/help lists them)."
    if failed_plugins:
        said += (
            f" {', '.join(sorted(failed_plugins))} failed to load, so "
            f"{'its' if len(failed_plugins) == 1 else 'their'} commands are missing "
            "(`dsh plugins` says why)."
        )
    return said
