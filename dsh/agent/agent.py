"""The agent: what UIs, commands and plugins use to drive one agent on one session.

:class:`Agent` implements :class:`~dsh.agent_handle.AgentHandle` (where ``send``,
``followup``, ``steer`` and ``inject`` are described) and keeps what outlives a
turn: the options, the inbox, the context entered so far, the admission of turns.
Each turn is a :class:`~dsh.agent.turn.Turn` of its own.

The driver task runs turns while waking work is queued. ``status`` is ``running`` from
a waking send until the driver exits. ``cancel`` aborts the running turn (whose
closing events are still written) and, unless told to keep it, clears the inbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dsh.agent.cache_watch import CacheWatch
from dsh.agent.hooks import AGENT_PROMPT_BLOCKED, AGENT_PROMPT_SUBMIT, AGENT_STATUS
from dsh.agent.inbox import Inbox
from dsh.agent.interception import PromptAllow, PromptBlock, PromptSubmit
from dsh.agent.turn import AgentServices, Turn
from dsh.agent_handle import AgentHandle, Edit, InboxItem, Remove, RewindError, Status, Target
from dsh.llm import (
    LlmService,
    Message,
    PluginSource,
    SessionId,
    UserMessage,
    new_message_id,
    user_text,
)
from dsh.permission_modes import PermissionMode
from dsh.policy.rules import Rule
from dsh.session import CancelCause, Session, SessionSink, TurnAborted, TurnEndReason
from dsh.session.payloads import (
    AgentOptionsSet,
    CancelByDisposal,
    HistoryRewound,
    PermissionModeSet,
    PromptTrigger,
)
from dsh.session.turns import TurnNotFoundError, find_turn, turn_prompt, turns
from dsh.settings_tables import AgentOptions
from dsh.tools import ToolService
from dsh.tools.approval import PERMISSION_MODE_CHANGED

T = TypeVar("T")


class Agent:
    def __init__(
        self,
        services: AgentServices,
        session: Session,
        sink: SessionSink,
        *,
        options: AgentOptions,
        cwd: Path,
        opened_at: int | None = None,
        label: str | None = None,
        parent: AgentHandle | None = None,
    ) -> None:
        self._services = services
        self._sink = sink
        self.root = services.root
        self.session = session
        self.opened_at = len(session.events) if opened_at is None else opened_at
        """The log's length when this process took the session up: the events from
        here on are this run's (a resume may log some before the agent exists)."""
        self.options = options
        self.cwd = cwd
        self.label = label
        """Who this agent is to the person when it is not the one a front end shows (a
        subagent's description); None for a session's own agent."""
        self.parent = parent
        """The live agent that delegated to this one; None for a session's own."""
        self.ctx = services.root.child(self, name=f"agent:{session.id}")
        self.inbox = Inbox(session)
        self._cache_watch = CacheWatch()
        self.status: Status = "idle"
        self._entered: _EnteredContext | None = None
        self._turn: Turn | None = None
        self._driver: asyncio.Task[None] | None = None
        self._reservation: asyncio.Event | None = None
        self._stopping = False
        self._driving = False
        """The driver's loop still looks at the queue: a send needs no new driver."""
        self._held = False
        """A cancel kept the inbox: the driver leaves the queue for the next send."""
        self._waking = False
        """A send came while the driver was saying "idle": it starts again next."""
        # The mode is the runtime's, told on the root (an agent's own scope hears only
        # what concerns the agent): heard there for as long as the agent stands.
        self.ctx.effect(lambda: self.root.on(PERMISSION_MODE_CHANGED, self._mode_changed))

    @property
    def id(self) -> SessionId:
        return self.session.id

    def _mode_changed(self, mode: PermissionMode) -> None:
        """Log the change at its moment (between which chunks, before which result), so
        a replay makes it there too. A session with nothing in it yet stays unwritten:
        its first turn's ``turn/start`` says the mode it starts in."""
        if self.session.next_seq > 0:
            self.session.append("permissions/mode", PermissionModeSet(mode=mode))

    @property
    def llm(self) -> LlmService:
        return self._services.llm

    @property
    def tools(self) -> ToolService:
        return self._services.tools

    # ------------------------------------------------------------------ delivery

    @property
    def accepts_next_step(self) -> bool:
        """Whether a waking next-step send can join the running turn now."""
        return self._turn is not None and self._turn.accepts_steering

    def send(self, message: UserMessage, target: Target, wakeup: bool) -> InboxItem | None:
        if target == "next-step" and not wakeup:
            self.inject(message)
            return None
        if target == "next-step" and self.accepts_next_step:
            return self.inbox.enqueue(message, "steering")
        item = self.inbox.enqueue(message, "queued")
        if wakeup:
            self._wake()
        return item

    def followup(self, message: UserMessage) -> InboxItem | None:
        return self.send(message, "next-turn", True)

    def steer(self, message: UserMessage) -> InboxItem | None:
        return self.send(message, "next-step", True)

    def try_steer(self, message: UserMessage) -> bool:
        """Steer only if the running turn can still take it; never becomes a follow-up."""
        if not self.accepts_next_step:
            return False
        self.inbox.enqueue(message, "steering")
        return True

    def inject(self, message: UserMessage) -> None:
        """Context for the model without running it: staged for the next step of the
        open turn, or appended to the log now when no turn is open."""
        if self._turn is not None and self._turn.open:
            self.inbox.stage(message)
        else:
            self.session.append("user/message", message)

    def update_inbox(self, item_id: str, action: Edit | Remove) -> bool:
        match action:
            case Edit(content=content):
                return self.inbox.edit(item_id, content)
            case Remove():
                return self.inbox.remove(item_id)
        return False

    def set_options(self, **changes: Any) -> None:
        """Switch model, provider, effort or limits from the next request on. What
        changed is logged at its moment (``agent/options``), so a replay switches there
        too: the requests after it are built with options no input the log holds would
        otherwise explain. A session with nothing in it yet stays unwritten: its first
        ``request/header`` says the options."""
        before = self.options
        self.options = before.model_copy(update=changes)
        changed = {
            name: value for name, value in changes.items() if getattr(before, name, None) != value
        }
        if changed and self.session.next_seq > 0:
            self.session.append("agent/options", AgentOptionsSet(changes=changed))

    # ------------------------------------------------------------------ control

    def cancel(self, cause: CancelCause, *, keep_inbox: bool = False) -> None:
        """Abort the running turn (the first cause wins) and clear the inbox unless
        ``keep_inbox``. Does nothing while idle."""
        if self.status == "idle":
            return
        if not keep_inbox:
            self.inbox.clear("cancelled")
        if self._turn is not None:
            self._held = keep_inbox
            self._turn.cancel(cause)

    async def when_idle(self) -> None:
        """Return once no turn runs and none is about to."""
        while True:
            driver = self._driver
            if driver is not None and not driver.done():
                await asyncio.wait({driver})
                continue
            if self._reservation is not None:
                await self._reservation.wait()
                continue
            if self._waking:
                await asyncio.sleep(0)
                continue
            return

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        """Hold the next turn back (sends still queue) until the returned function is
        called. None while running or already reserved."""
        if self.status == "running" or self._reservation is not None:
            return None
        reservation = asyncio.Event()
        self._reservation = reservation

        def release() -> None:
            # A driver woken meanwhile is waiting on the reservation and goes on by itself.
            if self._reservation is reservation:
                self._reservation = None
                reservation.set()

        return release

    async def run_maintenance(self, task: Callable[[], Awaitable[T]]) -> T:
        """Run ``task`` (say, compaction) while no turn can start."""
        release = self.reserve_turn_admission()
        if release is None:
            raise RuntimeError("maintenance needs the agent to be idle")
        try:
            return await task()
        finally:
            release()

    async def flush(self, *, sync: bool = True) -> bool:
        """Store the session's events so far (``sync``: through a power cut too)."""
        return await self._sink.flush(sync=sync)

    def rewind(self, turn: int, *, restore_id: str | None = None) -> UserMessage:
        """Take the conversation back to just before ``turn``; returns its prompt."""
        if self.status != "idle" or self._reservation is not None or self._turn is not None:
            raise RewindError("a turn is running: rewind once it has ended (or stop it first)")
        try:
            info = find_turn(turns(self.session), turn, visible=True)
        except TurnNotFoundError as error:
            raise RewindError(str(error)) from None
        self.session.append(
            "history/rewound",
            HistoryRewound(turn=turn, to_seq=info.start_seq, restore_id=restore_id),
        )
        prompt = turn_prompt(self.session.events, info)
        if prompt is None:  # a turn no one typed (a background job woke it)
            return user_text("")
        # Sent again, it is a new message: the rewound one keeps its id in the log.
        return prompt.model_copy(update={"id": new_message_id()})

    async def dispose(self) -> None:
        """Stop the running turn (queued prompts stay durable for a later resume),
        then undo everything registered in this agent's scope."""
        self._stopping = True
        if self._turn is not None:
            self._turn.cancel(CancelByDisposal())
        await self.when_idle()
        await self.ctx.dispose()

    # ------------------------------------------------------------------ turns

    def _wake(self) -> None:
        # A send is what a kept queue waits for, whenever it comes: even in the moment
        # between a cancelled turn's end and the driver looking at the queue again.
        self._held = False
        if self._driving:
            return
        if self._driver is not None and not self._driver.done():
            # The driver has left its loop and is saying "idle" (a status listener
            # sends): a new driver starts once that is said, so no listener hears
            # "idle" after "running".
            if not self._waking:
                self._waking = True
                asyncio.get_running_loop().call_soon(self._wake_again)
            return
        self._driving = True
        self._set_status("running")
        self._driver = self.ctx.spawn(self._drive(), name=f"driver:{self.id}")

    def _wake_again(self) -> None:
        self._waking = False
        if self.inbox.has_queued and not self._stopping:
            self._wake()

    async def _drive(self) -> None:
        """Run a turn for each queued prompt, in order, that the ``prompt-submit``
        hooks let through."""
        try:
            while not self._stopping:
                if self._reservation is not None:
                    await self._reservation.wait()
                    continue
                item = self.inbox.next_queued
                if item is None:
                    break
                decision = await self.root.waterfall(
                    AGENT_PROMPT_SUBMIT,
                    PromptSubmit(self, item.message),
                    default=lambda submit: PromptAllow(),
                )
                if self.inbox.next_queued is not item:
                    continue  # edited or removed while the hooks ran
                if isinstance(decision, PromptBlock):
                    self.inbox.remove(item.id, "blocked", decision.reason)
                    self.root.emit(AGENT_PROMPT_BLOCKED, self, item.message, decision.reason)
                    continue
                self.inbox.claim_turn()
                prompt = item.message
                if decision.content is not None:
                    prompt = prompt.model_copy(update={"content": decision.content})
                ended = await self._run_turn(
                    prompt, decision.additional_contexts, allow=decision.allow
                )
                if isinstance(ended, TurnAborted) and self._held:
                    self._held = False
                    break  # a cancel that kept the inbox: the queue waits for the next send
        finally:
            self._driving = False
            self._set_status("idle")

    async def _run_turn(
        self, prompt: UserMessage, extra: tuple[UserMessage, ...], *, allow: tuple[Rule, ...] = ()
    ) -> TurnEndReason:
        self._held = False  # a cancel that kept the inbox is about the turn it cancelled
        turn = self._turn = Turn(
            self,
            self._services,
            self._sink,
            self.inbox,
            trigger=PromptTrigger(),
            allow=allow,
            cache_watch=self._cache_watch,
        )
        try:
            return await turn.run(prompt, extra)
        finally:
            self._turn = None

    def entered_context(self) -> dict[str, str]:
        """The text of each context entry as history holds it now (compaction may have
        folded older ones away, and then they are entered again)."""
        # Folded forward from the last call: history only grows between compactions.
        # The last message seen must still be in its place, or the fold starts over.
        messages = self.session.derive_messages()
        generation = self.session.replace_generation
        cached = self._entered
        if (
            cached is None
            or cached.generation != generation
            or len(messages) < cached.seen
            or (cached.seen and messages[cached.seen - 1] is not cached.last)
        ):
            cached = self._entered = _EnteredContext(generation)
        for message in messages[cached.seen :]:
            if isinstance(message.source, PluginSource) and message.role == "user":
                cached.latest[message.source.plugin] = message.text()
        cached.seen = len(messages)
        cached.last = messages[-1] if messages else None
        return dict(cached.latest)

    def _set_status(self, status: Status) -> None:
        if status != self.status:
            self.status = status
            self.root.emit(AGENT_STATUS, self, status)


@dataclass
class _EnteredContext:
    generation: int
    seen: int = 0
    last: Message | None = None
    latest: dict[str, str] = field(default_factory=dict)
