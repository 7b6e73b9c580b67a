"""The agent handle: what UIs, commands and plugins use to drive one agent.

``send`` is the one delivery primitive, over (target, wakeup):

- ``followup`` (next-turn, wakes): a prompt that gets a turn of its own, in order;
- ``steer`` (next-step, wakes): joins the running turn at its next step; when no turn
  can take it, it becomes a follow-up;
- ``inject`` (next-step, no wake): context for the next step, or appended at once.

The driver task runs turns while waking work is queued. ``status`` is ``running`` from
a waking send until the driver exits. ``cancel`` aborts the running turn (whose
closing events are still written) and, unless told to keep it, clears the inbox.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import PositiveInt

from dsh.agent.inbox import Inbox, InboxItem
from dsh.agent.interception import (
    ERROR,
    PROMPT_BLOCKED,
    PROMPT_SUBMIT,
    STATUS,
    PromptAllow,
    PromptBlock,
)
from dsh.agent.signal import TurnSignal
from dsh.kernel import Context
from dsh.llm import (
    Block,
    CallId,
    LlmCallConfig,
    LlmService,
    Message,
    PluginSource,
    SessionId,
    UserMessage,
)
from dsh.prompt import Assembly, PromptContext, PromptService
from dsh.session import CancelCause, Session, TurnAborted
from dsh.session.events import CancelByDisposal, PromptTrigger
from dsh.tools import ToolContext, ToolService
from dsh.wire import Frozen

_log = logging.getLogger("dsh.agent")
T = TypeVar("T")

Status = Literal["idle", "running"]
Target = Literal["next-turn", "next-step"]


class AgentOptions(Frozen):
    provider: str = "deepseek"
    model: str = "deepseek-v4-flash"
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: PositiveInt | None = None
    max_steps: PositiveInt | None = None
    """Steps one turn may take before it is ended with reason ``max-steps``."""
    auto_title: bool = False
    """Title the session after its first completed turn: at once from the first prompt,
    then by the model in the background (the ``title`` plugin, purpose
    ``session-title``). Interactive UIs turn it on; a headless run only when asked
    (``--title``), so a script pays for no model call it did not request."""


@dataclass(frozen=True)
class Edit:
    content: tuple[Block, ...]


@dataclass(frozen=True)
class Remove:
    pass


class Agent:
    def __init__(
        self,
        *,
        root: Context,
        session: Session,
        options: AgentOptions,
        llm: LlmService,
        tools: ToolService,
        prompt: PromptService,
        flush: Callable[[bool], Awaitable[bool]],
        write_soon: Callable[[], None] = lambda: None,
        write_error: Callable[[], BaseException | None] = lambda: None,
        cwd: Path,
        opened_at: int | None = None,
    ) -> None:
        self.root = root
        self.session = session
        self.opened_at = len(session.events) if opened_at is None else opened_at
        """The log's length when this process took the session up: the events from
        here on are this run's (a resume may log some before the agent exists)."""
        self.options = options
        self.llm = llm
        self.tools = tools
        self.prompt = prompt
        self.cwd = cwd
        self._flush = flush
        self.write_soon = write_soon
        """Start storing the session's events so far, without waiting."""
        self.write_error = write_error
        """Why the last write of the session failed, while its events wait unwritten."""
        self._entered: _EnteredContext | None = None
        self.ctx = root.child(self, name=f"agent:{session.id}")
        self.inbox = Inbox(session)
        self.status: Status = "idle"
        self.settling = False
        self.headers_logged = False
        self.effects = 0
        """Tool calls with effects run so far (counted by the driver): see ``workspace``."""
        self._signal: TurnSignal | None = None
        self._driver: asyncio.Task[None] | None = None
        self._reservation: asyncio.Event | None = None
        self._stopping = False

    @property
    def id(self) -> SessionId:
        return self.session.id

    # ------------------------------------------------------------------ delivery

    @property
    def accepts_next_step(self) -> bool:
        """Whether a waking next-step send can join the running turn now."""
        return self._signal is not None and not self._signal.aborted and not self.settling

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
        if self._signal is not None:
            self.inbox.injected.append(message)
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
        """Switch model, provider, effort or limits from the next request on."""
        self.options = self.options.model_copy(update=changes)

    # ------------------------------------------------------------------ control

    def cancel(self, cause: CancelCause, *, keep_inbox: bool = False) -> None:
        """Abort the running turn (the first cause wins) and clear the inbox unless
        ``keep_inbox``. Does nothing while idle."""
        if self.status == "idle":
            return
        if not keep_inbox:
            self.inbox.clear("cancelled")
        if self._signal is not None:
            self._signal.abort(cause)

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

    async def dispose(self) -> None:
        """Stop the running turn (queued prompts stay durable for a later resume),
        then undo everything registered in this agent's scope."""
        self._stopping = True
        if self._signal is not None:
            self._signal.abort(CancelByDisposal())
        await self.when_idle()
        await self.ctx.dispose()

    # ------------------------------------------------------------------ the driver

    def _wake(self) -> None:
        if self._driver is not None and not self._driver.done():
            return
        self._set_status("running")
        self._driver = self.ctx.spawn(self._drive(), name=f"driver:{self.id}")

    async def _drive(self) -> None:
        from dsh.agent.driver import run_turn

        try:
            while not self._stopping:
                if self._reservation is not None:
                    await self._reservation.wait()
                    continue
                if not self.inbox.queued:
                    break
                item = self.inbox.queued[0]
                decision = await self.root.waterfall(
                    PROMPT_SUBMIT,
                    self,
                    item.message,
                    default=lambda a, m: PromptAllow(),
                    subject=self,
                )
                if not self.inbox.queued or self.inbox.queued[0] is not item:
                    continue  # edited or removed while the hooks ran
                if isinstance(decision, PromptBlock):
                    self.inbox.queued.popleft()
                    self.inbox.discard([item], "blocked", decision.reason)
                    self.root.emit(
                        PROMPT_BLOCKED, self, item.message, decision.reason, subject=self
                    )
                    continue
                self.inbox.claim_turn()
                prompt = item.message
                if decision.content is not None:
                    prompt = prompt.model_copy(update={"content": decision.content})
                ended = await run_turn(self, prompt, decision.additional_contexts, PromptTrigger())
                if isinstance(ended, TurnAborted) and self.inbox.queued:
                    break  # a cancel that kept the inbox: the queue waits for the next send
        finally:
            self._set_status("idle")

    # ------------------------------------------------------------------ for the driver

    def begin_turn(self) -> TurnSignal:
        self._signal = TurnSignal()
        self.settling = False
        return self._signal

    def end_turn(self) -> None:
        self._signal = None
        self.settling = False
        # Nothing is lost when a turn ends with work still staged for a next step:
        # context goes into the log now, steering waits as a prompt of its own.
        for message in self.inbox.injected:
            self.session.append("user/message", message)
        self.inbox.injected.clear()
        while self.inbox.steering:
            self.inbox.queued.append(self.inbox.steering.popleft())

    async def flush(self, *, sync: bool = True) -> bool:
        """Store the session's events so far (``sync``: through a power cut too)."""
        return await self._flush(sync)

    async def assemble(self) -> Assembly:
        context = PromptContext(
            agent=self,
            scope=self,
            cwd=self.cwd,
            provider=self.options.provider,
            model=self.options.model,
            workspace=self.workspace,
        )
        return await self.prompt.assemble(context)

    @property
    def workspace(self) -> tuple[int, int]:
        """A value that changes whenever the working tree may have changed: at each turn
        and after each tool call with effects (``PromptContext.workspace``)."""
        return (self.session.last_turn, self.effects)

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

    def seed_config(self) -> LlmCallConfig:
        """The call config proposed for the next request: the agent's options, plus what
        was chosen explicitly (not filled in by the adapter) for the same route before."""
        options = self.options
        fields: dict[str, Any] = {
            "provider": options.provider,
            "model": options.model,
            "reasoning_effort": options.reasoning_effort,
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
        }
        header = self.session.request_header()
        if header is not None and (header.config.provider, header.config.model) == (
            options.provider,
            options.model,
        ):
            defaults = header.adapter_defaults or {}
            logged = header.config
            if fields["reasoning_effort"] is None and not defaults.get("reasoningEffort"):
                fields["reasoning_effort"] = logged.reasoning_effort
            if fields["max_tokens"] is None and not defaults.get("maxTokens"):
                fields["max_tokens"] = logged.max_tokens
            if fields["temperature"] is None:
                fields["temperature"] = logged.temperature
        return LlmCallConfig(**fields)

    def tool_context(self, call_id: CallId, signal: asyncio.Event) -> ToolContext:
        spill = self.tools.spill
        session_id = self.session.id
        return ToolContext(
            call_id=call_id,
            agent=self,
            cwd=self.cwd,
            signal=signal,
            session_id=session_id,
            services=self.ctx,
            spill=(lambda text, label: spill.save(session_id, label, text)) if spill else None,
        )

    def report_error(self, error: BaseException) -> None:
        self.root.emit(ERROR, self, error, subject=self)

    def _set_status(self, status: Status) -> None:
        if status != self.status:
            self.status = status
            self.root.emit(STATUS, self, status, subject=self)


@dataclass
class _EnteredContext:
    generation: int
    seen: int = 0
    last: Message | None = None
    latest: dict[str, str] = field(default_factory=dict)
