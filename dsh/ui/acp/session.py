"""One ACP session: a front end over its own :class:`SessionController`.

The editor's session is a dsh session (the same id, log and catalog entry, so
``dsh --resume`` continues it in a terminal). Each has its own controller, and so its
own runtime: the project's settings, trust and permission mode are those of the
folder the editor opened it in. What the session does reaches the editor through a
queue that one task empties in order (:mod:`dsh.ui.acp.updates` says what); a prompt
returns once its turn ended and every update before it was sent.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    Cost,
    CurrentModeUpdate,
    PromptResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    StopReason,
    ToolCallUpdate,
    UnstructuredCommandInput,
    Usage,
    UsageUpdate,
)

from dsh.agent import Attached
from dsh.frontend import Kind
from dsh.permission_modes import MODES, PermissionMode
from dsh.session import SessionEvent, TurnEnd
from dsh.session.payloads import (
    CancelByUser,
    InboxDiscarded,
    TurnAborted,
    TurnBlocked,
    TurnMaxSteps,
    TurnMaxTokens,
)
from dsh.session.writer import SESSION_WRITE_FAILED
from dsh.tools.approval import PERMISSION_MODE_CHANGED, ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.ui.acp import permissions
from dsh.ui.acp.prompt_blocks import (
    Media,
    PromptBlock,
    attach,
    media_of,
    prompt_message,
    prompt_text,
)
from dsh.ui.acp.updates import Update, Updates, usage_of
from dsh.ui.entries import ToolEntry, TranscriptFold, TurnFooter
from dsh.ui.opening import BusyChoice
from dsh.ui.session_controller import SessionController, storage_problem
from dsh.ui.user_interface import SessionChoice

if TYPE_CHECKING:
    from acp.schema import ClientCapabilities

    from dsh.agent import AgentHandle
    from dsh.session import SessionBusyError
    from dsh.settings import Settings
    from dsh.ui.trusting import TrustAnswer, TrustQuestion

_log = logging.getLogger("dsh.acp")

MODE_NAMES: dict[PermissionMode, tuple[str, str]] = {
    "plan": ("Plan", "Reads and explores, then proposes a plan; nothing is written or run"),
    "read-only": ("Read only", "Reads and searches; file writes are denied, commands are asked"),
    "default": ("Ask", "Reads freely; asks before writing, running or fetching"),
    "accept-edits": ("Accept edits", "Edits files in the project unasked; asks for the rest"),
    "bypass": ("Bypass", "Runs everything unasked, except what a deny rule refuses"),
}


MODEL_OPTION = "model"
INTERNAL_ERROR = -32603  # JSON-RPC's code for a request the server could not carry out


class AcpSession:
    """The :class:`~dsh.ui.user_interface.UserInterface` of one editor session."""

    kind: Kind = "acp"
    answers = True
    one_session = True  # the editor opens and switches sessions itself
    attended = False  # no list to pick from in the protocol: what is typed is the answer

    def __init__(self, client: Client, choice: SessionChoice, *, replay: bool = True) -> None:
        self.client = client
        self.replay = replay
        """Whether a stored session's history is sent when it opens (``session/load``;
        not ``session/resume`` nor ``session/fork``)."""
        self.controller = SessionController(self, choice)
        self.cwd = self.controller.cwd
        self.agent: AgentHandle | None = None
        self.updates: Updates | None = None
        self._queue: asyncio.Queue[tuple[str, Update] | None] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._cancelled = False
        self._lock = asyncio.Lock()  # one prompt at a time
        self._commands: list[AvailableCommand] | None = None
        self._mode: PermissionMode | None = None
        """The mode the editor was last told of."""
        self._models: list[SessionConfigSelectOption] = []
        """The provider's models, once its catalog was read (after the session opened)."""

    @property
    def id(self) -> str:
        assert self.agent is not None, "the session is not open"
        return self.agent.id

    # ------------------------------------------------------------------ open, close

    async def open(self) -> None:
        """Start the runtime and open the session the choice names (new, or loaded:
        its history replayed before this returns). Raises
        :class:`~dsh.ui.session_controller.StartFailed`."""
        self._pump = asyncio.create_task(self._send_updates(), name="acp-updates")
        await self.controller.start()
        self.controller.ctx.on(PERMISSION_MODE_CHANGED, self._mode_changed)
        await self.controller.open_first()
        if self.agent is None:
            raise RequestError.invalid_params({"sessionId": "the session cannot be opened"})

    async def close(self) -> None:
        """Cancel a running turn (its closing events written), close the session and
        its runtime."""
        try:
            await self.controller.close()
        finally:
            if self._pump is not None:
                self._queue.put_nowait(None)
                await asyncio.gather(self._pump, return_exceptions=True)

    def modes(self) -> SessionModeState:
        current = self._mode = self.mode
        offered = [m for m in MODES if m != "bypass" or current == "bypass"]
        return SessionModeState(
            current_mode_id=current,
            available_modes=[
                SessionMode(id=m, name=MODE_NAMES[m][0], description=MODE_NAMES[m][1])
                for m in offered
            ],
        )

    @property
    def mode(self) -> PermissionMode:
        from dsh.tools.approval import APPROVALS

        return self.controller.ctx.get(APPROVALS).mode

    async def set_mode(self, mode_id: str) -> None:
        from dsh.tools.approval import APPROVALS

        offered = {m.id for m in self.modes().available_modes}
        mode = next((m for m in MODES if m == mode_id and m in offered), None)
        if mode is None:
            raise RequestError.invalid_params(
                {"modeId": f"unknown mode {mode_id!r} (one of: {', '.join(sorted(offered))})"}
            )
        # The editor chose it: session/set_mode's response says it is in force. The
        # protocol's current_mode_update is how an agent tells of a change of its own,
        # and an echo arriving after the editor's next choice would undo that one.
        self._mode = mode
        self.controller.ctx.get(APPROVALS).mode = mode

    def _mode_changed(self, mode: PermissionMode) -> None:
        """``current_mode_update`` for each change dsh makes: an approved plan,
        ``/plan``, ``/permissions MODE``."""
        if self.agent is None or mode == self._mode:
            return  # not open yet (session/new's response says the mode), or the editor's
        self._mode = mode
        update = CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode)
        self._queue.put_nowait((self.id, update))

    # ------------------------------------------------------------------ the model

    def config_options(self) -> list[SessionConfigOptionSelect]:
        """The model, as the editor's model selector: the provider's models once its
        catalog was read (:meth:`read_models`), the current one until then."""
        assert self.agent is not None
        current = self.agent.options.model
        models = list(self._models)
        if current not in {m.value for m in models}:
            models.insert(0, SessionConfigSelectOption(value=current, name=current))
        return [
            SessionConfigOptionSelect(
                type="select",
                id=MODEL_OPTION,
                name="Model",
                category="model",
                description=f"The model of {self.agent.options.provider}, from the next request on",
                current_value=current,
                options=models,
            )
        ]

    def read_models(self) -> None:
        """Read the provider's catalog in the background (it may ask the provider),
        then offer its models (``config_option_update``)."""

        async def read() -> None:
            assert self.agent is not None
            runtime = self.controller.runtime
            assert runtime is not None
            try:
                catalog = await runtime.llm.catalog(self.agent.options.provider)
            except Exception:
                _log.warning("no model catalog for the editor's model list", exc_info=True)
                return
            self._models = [
                SessionConfigSelectOption(
                    value=entry.model.id,
                    name=entry.model.name,
                    description=(
                        f"{entry.model.context_window // 1000}K context"
                        if entry.model.context_window
                        else None
                    ),
                )
                for entry in catalog
            ]
            if self._models:
                update = ConfigOptionUpdate(
                    session_update="config_option_update", config_options=self.config_options()
                )
                self._queue.put_nowait((self.id, update))

        self.controller.ctx.spawn(read(), name="acp:models")

    def set_option(self, config_id: str, value: str | bool) -> list[SessionConfigOptionSelect]:
        assert self.agent is not None
        if config_id != MODEL_OPTION:
            raise RequestError.invalid_params({"configId": f"unknown option {config_id!r}"})
        known = {m.value for m in self._models}
        if not isinstance(value, str) or (known and value not in known):
            raise RequestError.invalid_params({"value": f"not a model of the provider: {value!r}"})
        options = self.agent.options
        try:
            self.agent.llm.resolve(options.provider, value)
        except Exception as error:
            raise RequestError.invalid_params({"value": str(error)}) from None
        self.agent.set_options(model=value)
        _log.info("session %s: model %s/%s", self.id, options.provider, value)
        return self.config_options()

    def use_editor_files(self, capabilities: ClientCapabilities | None) -> None:
        """The agent's tools read and write files through the editor, as far as it
        offers to (``initialize``); they go with the agent."""
        from dsh.tools.files import WORKSPACE_FILES
        from dsh.ui.acp.files import EditorFiles, offered

        reads, writes = offered(capabilities)
        if self.agent is None or not (reads or writes):
            return
        disk = self.controller.ctx.get(WORKSPACE_FILES)
        files = EditorFiles(self.client, self.agent.id, reads=reads, writes=writes, disk=disk)
        self.agent.ctx.provide(WORKSPACE_FILES, files)

    def announce_commands(self) -> None:
        """``available_commands_update``: the slash commands a prompt may start with,
        when they changed since last said (a plugin's come and go: custom commands,
        an MCP server's prompts)."""
        commands = [
            AvailableCommand(
                name=command.name,
                description=command.description,
                input=(
                    AvailableCommandInput(root=UnstructuredCommandInput(hint=command.arguments))
                    if command.arguments
                    else None
                ),
            )
            for command in self.controller.commands.complete("", quitting=False)
        ]
        if commands == self._commands:
            return
        self._commands = commands
        update = AvailableCommandsUpdate(
            session_update="available_commands_update", available_commands=commands
        )
        self._queue.put_nowait((self.id, update))

    # ------------------------------------------------------------------ prompts

    async def prompt(self, blocks: Sequence[PromptBlock]) -> PromptResponse:
        async with self._lock:
            return await self._prompt(blocks)

    async def _prompt(self, blocks: Sequence[PromptBlock]) -> PromptResponse:

        agent = self.agent
        assert agent is not None
        # The sandbox's warning, the first time: a notice before the first answer
        # (updates sent before session/new's response may be dropped by the editor).
        await self.controller.sandbox_status()
        self._cancelled = False
        media = media_of(blocks)
        text = prompt_text(blocks, media).strip()
        if not text and not media:
            raise RequestError.invalid_params({"prompt": "nothing to send"})
        start = len(agent.session.events)
        # The send policy every front end has: a command runs, an unknown /word is
        # refused (said in the answer), never sent to the model as text.
        sent = "not-a-command" if media else await self.controller.run_slash(text)
        if sent == "refused":
            await self.flush()
            return PromptResponse(stop_reason="end_turn")
        if sent == "ran":
            if self._cancelled:
                # Cancelled while the command ran (at one of its ! lines' questions,
                # say): the prompt it queued does not go out either.
                agent.cancel(CancelByUser())
        else:
            attached = await self._attach(media)
            if attached.refusal is not None:
                self.show(attached.refusal, level="error")  # as the TUI says it: nothing sent
                await self.flush()
                return PromptResponse(stop_reason="refusal")
            if self._cancelled:  # while the images were checked: stored, never sent
                return PromptResponse(stop_reason="cancelled")
            agent.followup(prompt_message(blocks, media, attached.blocks))
        # A command may send a prompt of its own (a custom command's): the editor's
        # prompt ends with the turn it opened, as a typed one does.
        await agent.when_idle()
        self._report_usage()
        self.announce_commands()
        await self.flush()
        events = agent.session.events[start:]
        unsaved = await self._unsaved(start)
        if unsaved is not None:
            # Not an ending the editor may take for a normal one: what it showed is
            # not all stored, so the prompt itself failed.
            raise RequestError(INTERNAL_ERROR, unsaved, {"code": SESSION_WRITE_FAILED})
        return PromptResponse(stop_reason=self._stop_reason(events), usage=self._usage(start))

    async def _unsaved(self, start: int) -> str | None:
        """Why the prompt's work (its events from seq ``start``) is not all stored: its
        events cannot be written, or a failing write stopped its turn. None when it is
        stored."""
        agent, runtime = self.agent, self.controller.runtime
        assert agent is not None
        assert runtime is not None
        await runtime.sessions.flush(agent.session, sync=False)
        return storage_problem(runtime, agent, since=start)

    async def _attach(self, media: Sequence[Media]) -> Attached:
        if not media:
            return Attached()
        assert self.agent is not None
        assert self.controller.runtime is not None
        return await attach(self.controller.runtime.root, self.agent, media)

    def _stop_reason(self, events: Sequence[SessionEvent]) -> StopReason:
        if self._cancelled:
            return "cancelled"
        ends = [e.data.reason for e in events if isinstance(e.data, TurnEnd)]
        if not ends:
            blocked = any(
                isinstance(e.data, InboxDiscarded) and e.data.reason == "blocked" for e in events
            )
            return "refusal" if blocked else "end_turn"
        match ends[-1]:
            case TurnAborted():
                return "cancelled"
            case TurnMaxTokens():
                return "max_tokens"
            case TurnMaxSteps():
                return "max_turn_requests"
            case TurnBlocked():
                return "refusal"
        return "end_turn"  # a failure was said in the answer (the turn's footer)

    def _usage(self, start: int) -> Usage | None:
        assert self.updates is not None
        footers = [
            entry
            for entry in self.updates.fold.entries
            if isinstance(entry, TurnFooter) and entry.seq >= start
        ]
        return usage_of(footers[-1].usage) if footers else None

    def _report_usage(self) -> None:
        """``usage_update``: how full the context is, and the session's cost so far."""
        if self.updates is None or self.agent is None:
            return
        status = self.updates.fold.status
        if not status.context_tokens or not status.context_window:
            return
        cost = Cost(amount=status.cost, currency="USD") if status.cost is not None else None
        update = UsageUpdate(
            session_update="usage_update",
            used=status.context_tokens,
            size=status.context_window,
            cost=cost,
        )
        self._queue.put_nowait((self.agent.id, update))

    def cancel(self) -> None:
        """``session/cancel``: the turn stops; a permission request it waits on is
        answered as cancelled (the approvals service withdraws it), and nothing of
        the turn runs after."""
        self._cancelled = True
        if self.agent is not None:
            self.agent.cancel(CancelByUser())

    async def flush(self) -> None:
        """Return once every update queued so far was sent."""
        await self._queue.join()

    async def _send_updates(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    return
                session_id, update = item
                await self.client.session_update(session_id=session_id, update=update)
            except ConnectionError:
                pass  # the editor left: what it misses is in the log
            except Exception:
                _log.exception("a session update could not be sent")
            finally:
                self._queue.task_done()

    def _on_event(self, event: SessionEvent) -> None:
        if self.updates is None or self.agent is None:
            return
        session_id = self.agent.id
        for update in self.updates.apply(event):
            self._queue.put_nowait((session_id, update))

    # ------------------------------------------------------------------ UserInterface

    def show(self, text: str, *, level: str = "info") -> None:
        """A slash command's output, or a note: said in the answer, where the editor
        shows it (before a session is open: only logged)."""
        _log.log(logging.ERROR if level == "error" else logging.INFO, "%s", text)
        if self.agent is None:
            return
        from dsh.ui.acp.updates import said

        self._queue.put_nowait((self.agent.id, said(f"{text}\n\n")))

    def show_warning(self, text: str) -> None:
        _log.warning("%s", text)
        if self.agent is not None:
            from dsh.ui.acp.updates import said

            self._queue.put_nowait((self.agent.id, said(f"⚠ dsh: {text}.\n\n")))

    def show_ignored(self, settings: Settings) -> None:
        from dsh.ui.trusting import ignored_lines

        for line in ignored_lines(settings):
            _log.warning("%s", line)

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        from dsh.tools.service import TOOLS

        runtime = self.controller.runtime
        assert runtime is not None
        self.agent = agent
        self.updates = Updates(
            TranscriptFold(cost=runtime.llm.cost),
            self.controller.ctx.get(TOOLS),
            agent.cwd,
            echo_user=replay,
        )
        events = list(agent.session.events)
        for event in events:
            for update in self.updates.apply(event):
                if replay and self.replay:
                    await self.client.session_update(session_id=agent.id, update=update)
        self.updates.echo_user = False
        stop_updates = agent.session.subscribe(self._on_event, from_seq=len(events))
        stop_following = runtime.sessions.follow(agent.session, failing=self._storage)

        def unsubscribe() -> None:
            stop_updates()
            stop_following()

        self._unsubscribe = unsubscribe

    def _storage(self, error: BaseException | None) -> None:
        """Said in the answer the moment the session's writes start failing, and when
        they work again."""
        from dsh.session.writer import RECOVERED_MESSAGE, failing_message

        if error is None:
            self.show(RECOVERED_MESSAGE)
        else:
            self.show(failing_message(error), level="error")

    def use_editor_terminals(self, capabilities: ClientCapabilities | None) -> None:
        """The agent's shell commands run in the editor's terminals, when it offers them
        (``initialize``); they go with the agent."""
        from dsh.ui.acp.terminals import offer_terminals

        if self.agent is not None and capabilities is not None and capabilities.terminal:
            offer_terminals(self.agent, self.client, self.controller.ctx, self._terminal_shown)

    def _terminal_shown(self, call_id: str, terminal_id: str) -> None:
        if self.updates is not None and self.agent is not None:
            for update in self.updates.terminal(call_id, terminal_id):
                self._queue.put_nowait((self.agent.id, update))

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def show_read_only(self, events: Sequence[SessionEvent]) -> None:
        pass  # never asked: ask_busy chooses nothing

    async def quit(self) -> None:
        # Not offered to the editor, but a prompt may still start with /exit.
        self.show("dsh runs as this editor's agent: close the session in the editor to end it.")

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        return "later"  # what the project would widen stays ignored (dsh trust PATH)

    async def set_up(self, home: Path, settings: Settings) -> bool | None:
        return None  # authenticate says where the key goes

    async def ask_busy(self, busy: SessionBusyError) -> BusyChoice | None:
        return None  # another dsh writes it: the request fails and says so

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        await self.flush()  # the editor knows the call before it is asked about it
        try:
            response = await self.client.request_permission(
                session_id=self.id,  # a subagent's call is asked in the session shown
                tool_call=permissions.approval_call(request),
                options=permissions.approval_options(request),
            )
        except (ConnectionError, RequestError) as error:
            return ApprovalDecision(
                outcome="unavailable", feedback=f"the editor did not answer: {error}"
            )
        return permissions.decision(response)

    async def ask_questions(self, questions: Sequence[Question]) -> list[Answer] | None:
        question = permissions.askable(questions)
        if question is None or self.agent is None:
            return permissions.refusals(questions)
        await self.flush()
        try:
            response = await self.client.request_permission(
                session_id=self.agent.id,
                tool_call=ToolCallUpdate(
                    tool_call_id=self._asking_call(), title=question.question, status="pending"
                ),
                options=permissions.question_options(question),
            )
        except (ConnectionError, RequestError):
            return None
        answer = permissions.question_answer(question, response)
        return [answer] if answer is not None else None

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        await self.flush()  # the editor knows the plan tool's call before it is asked on it
        try:
            response = await self.client.request_permission(
                session_id=self.id,
                tool_call=permissions.plan_call(review),
                options=permissions.plan_options(),
            )
        except (ConnectionError, RequestError) as error:
            return PlanDecision(outcome="unavailable", note=f"the editor did not answer: {error}")
        return permissions.plan_decision(response)

    def _asking_call(self) -> str:
        """The running call that asks (the newest): the editor shows the question on it."""
        if self.updates is not None:
            for entry in reversed(self.updates.fold.entries):
                if isinstance(entry, ToolEntry) and entry.status == "running":
                    return entry.call_id
        return f"question-{uuid.uuid4().hex}"

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        return None  # no list to pick from in the protocol: a command says what to type

    async def pick_session(self) -> str | None:
        return None
