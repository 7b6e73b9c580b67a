"""A turn: one prompt answered, in steps.

A turn runs steps until the model stops asking for tools and no steering is waiting:
each step enters its messages (the prompt, steering, fresh context), asks the model,
and runs the tools it called. Every fact goes into the session log as it happens; the
closing events (``step/end``, ``turn/end``) are always written, whatever stops the
turn, so the log stays sound.

Reading order: :meth:`Turn.run`, :meth:`Turn.step`, :meth:`Turn.query`,
:meth:`Turn.run_tools`. A :class:`Turn` holds what belongs to one turn: its number,
its steps, its cancel signal, whether it is settling, the calls with effects it ran.
What outlives it (options, inbox, the context entered so far) is the agent's, which
the turn reaches through the agent's handle and the collaborators it is given.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from dsh.agent.cache_watch import CacheWatch
from dsh.agent.hooks import (
    AGENT_ERROR,
    AGENT_PRE_STEP,
    AGENT_REQUEST,
    AGENT_REQUEST_ERROR,
    AGENT_TURN_STOPPING,
)
from dsh.agent.inbox import Inbox
from dsh.agent.interception import Enter, PreRequest, PreStep, Reject, RequestError, Retry
from dsh.agent.interruption import (
    CUT_CODES,
    MAX_CONTINUATIONS,
    continuation_note,
    interruption_note,
)
from dsh.agent.progress import ProgressLog
from dsh.agent.requests import (
    adjusted_fields,
    log_retry,
    no_recovery,
    note_renamed,
    seed_config,
    stream_failure,
)
from dsh.agent.signal import TurnCancelled, TurnSignal
from dsh.agent_handle import AgentHandle
from dsh.checkpoints.service import CHECKPOINTS
from dsh.kernel import Context
from dsh.llm import (
    AssistantMessage,
    BlockAssembler,
    CallId,
    FinishAborted,
    Finished,
    FinishMaxTokens,
    GenerateOptions,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    LlmService,
    MessageId,
    ModelSource,
    PluginSource,
    StreamProtocolError,
    TextBlock,
    ToolCallBlock,
    UserMessage,
    tool_result,
)
from dsh.prompt import Assembly, PromptContext, PromptService
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    CancelCause,
    EpochHeader,
    RequestContext,
    RequestHeader,
    Session,
    SessionSink,
    StepEnd,
    StepStart,
    ToolCall,
    ToolErrorIdentity,
    ToolProgress,
    ToolResult,
    TurnAborted,
    TurnBlocked,
    TurnCompleted,
    TurnEnd,
    TurnEndReason,
    TurnFailed,
    TurnMaxSteps,
    TurnMaxTokens,
    TurnStart,
    TurnTrigger,
)
from dsh.session.payloads import CancelByUser
from dsh.session.writer import SESSION_WRITE_FAILED, unstored_message
from dsh.tools import Rule, ToolContext, ToolService

_log = logging.getLogger("dsh.agent")

MAX_PARALLEL_CALLS = 10


@dataclass(frozen=True)
class AgentServices:
    """What every agent of a runtime works with: the root context its hooks run on,
    and the core services its turns call."""

    root: Context
    llm: LlmService
    tools: ToolService
    prompt: PromptService


class Turn:
    """One turn of an agent, from ``turn/start`` to ``turn/end``."""

    def __init__(
        self,
        agent: AgentHandle,
        services: AgentServices,
        sink: SessionSink,
        inbox: Inbox,
        *,
        trigger: TurnTrigger,
        cache_watch: CacheWatch | None = None,
        allow: tuple[Rule, ...] = (),
    ) -> None:
        self.agent = agent
        self.allow = allow
        """Rules this turn's calls may use without asking (see ``PromptAllow.allow``)."""
        self.services = services
        self.sink = sink
        self.inbox = inbox
        self.cache_watch = CacheWatch() if cache_watch is None else cache_watch
        """The agent's: it outlives the turn, to compare each request with the one before."""
        self.session: Session = agent.session
        self.number = self.session.last_turn + 1
        self.trigger = trigger
        self.signal = TurnSignal()
        self.steps = 0
        self.effects = 0
        """Tool calls with effects run so far: see :meth:`workspace`."""
        self.ends: TurnEndReason | None = None
        """How the turn ends, as far as known (None: it goes on, if it can)."""
        self.open = True
        """Until ``turn/end`` is written: a cancel aborts it, context is staged for it."""
        self._settling = False
        """After the ``turn-stopping`` listeners: nothing joins the turn any more."""
        self._progress = ProgressLog(self._log_progress)
        self.continuations = 0
        """Answers cut by a dropped stream that this turn asked the model to go on with."""

    # ------------------------------------------------------------------ control

    @property
    def accepts_steering(self) -> bool:
        return self.open and not self.signal.aborted and not self._settling

    def cancel(self, cause: CancelCause) -> None:
        """Abort the turn (the first cause wins); its closing events are still written."""
        if self.open:
            self.signal.abort(cause)

    # ------------------------------------------------------------------ the loop

    async def run(self, prompt: UserMessage, extra: tuple[UserMessage, ...]) -> TurnEndReason:
        """Answer ``prompt`` (with ``extra`` context after it): steps until the turn ends."""
        approvals = self.services.tools.approvals
        mode = approvals.mode if approvals is not None else None
        self.session.append(
            "turn/start", TurnStart(turn=self.number, trigger=self.trigger, mode=mode)
        )
        try:
            await self._steps((prompt, *extra))
        except TurnCancelled:
            self.ends = TurnAborted(reason=self.signal.cause or CancelByUser())
            if isinstance(self.ends.reason, CancelByUser):
                # Told in the next request: the user stopped it, and what was cut off.
                self.session.append("user/message", interruption_note(self.session, self.number))
        except LlmError as error:
            self.ends = TurnFailed(error=error.failure)
        except Exception as error:
            _log.exception("turn %d of %s failed", self.number, self.session.id)
            self.services.root.emit(AGENT_ERROR, self.agent, error)
            if self.signal.aborted:
                self.ends = TurnAborted(reason=self.signal.cause or CancelByUser())
            else:
                self.ends = TurnFailed(
                    error=LlmFailure(message=f"{type(error).__name__}: {error}", code="UNKNOWN")
                )
        finally:
            settled = isinstance(self.ends, TurnFailed | TurnAborted)
            # Written now, not just "no write has failed yet": the last events may be
            # waiting in the writer's window, and a turn can end within it.
            if not settled and not await self.sink.flush(sync=False):
                # The work is done but not stored: the turn did not succeed.
                self.ends = TurnFailed(error=self._write_failure())
            reason = self.ends or TurnCompleted()
            checkpoints = self.agent.ctx.get(CHECKPOINTS, None)
            if checkpoints is not None:
                # What the turn changed, for /undo and /rewind: before turn/end, so
                # a turn's events hold its checkpoints.
                await checkpoints.turn_ended(self.agent, self.number)
            self.session.append("turn/end", TurnEnd(turn=self.number, reason=reason))
            self._close()
            # Written before the agent goes idle; the fsync follows in the background.
            await self.sink.flush(sync=False)
        return reason

    async def _steps(self, first: tuple[UserMessage, ...]) -> None:
        """Step while there is something to enter: each time, claim what waits (the
        prompt first, then steering and staged context), let the ``pre-step``
        listeners decide what enters, and run the step; :attr:`ends` says why not."""
        root, agent = self.services.root, self.agent
        while True:
            steering, staged = self.inbox.claim_step()
            claimed = (
                *(first if self.steps == 0 else ()),
                *(item.message for item in steering),
                *staged,
            )
            steering_ids = {item.message.id for item in steering}
            assembly = await self.assemble()
            decision = await root.waterfall(
                AGENT_PRE_STEP,
                PreStep(agent, claimed, self.number, self.steps + 1, self.signal),
                default=self._entering(assembly),
            )
            if isinstance(decision, Reject):
                self.ends = TurnBlocked()
                return
            if self.ends is not None and not decision.messages:
                return
            if self.steps == 0 and not decision.messages:
                self.ends = TurnCompleted()
                return
            limit = agent.options.max_steps
            if limit is not None and self.steps >= limit:
                self.ends = TurnMaxSteps(limit=limit)
                return
            if await self.step(decision.messages, steering_ids, assembly):
                return  # a tool ended the turn; anything left waits outside it
            if self.ends is not None and not self.inbox.has_next_step:
                # Listeners may still steer the turn on; after them, nothing joins it.
                await root.serial(AGENT_TURN_STOPPING, agent, self.number, self.signal)
                self._settling = True
                if not self.inbox.has_next_step:
                    return
                self._settling = False

    def _close(self) -> None:
        """After ``turn/end``: nothing staged is lost (context goes into the log now,
        steering waits as a prompt of its own)."""
        self.open = False
        self._progress.close()
        for message in self.inbox.close_turn():
            self.session.append("user/message", message)

    async def step(
        self, messages: tuple[UserMessage, ...], steering_ids: set[MessageId], assembly: Assembly
    ) -> bool:
        """Enter ``messages``, ask the model, run the tools it calls. True when a tool
        concluded the turn."""
        self.steps += 1
        session = self.session
        session.append("step/start", StepStart(turn=self.number, step=self.steps))
        concluded = False
        try:
            for entered in messages:
                kind = "steering/message" if entered.id in steering_ids else "user/message"
                session.append(kind, entered)
            message, finish = await self.query(assembly)
            result: TurnEndReason | None
            if isinstance(finish, FinishMaxTokens):
                result = TurnMaxTokens()
            elif not message.tool_calls:
                result = TurnCompleted()
            else:
                concluded = await self.run_tools(message.tool_calls)
                result = TurnCompleted() if concluded else None
            if not isinstance(self.ends, TurnMaxTokens):  # max-tokens sticks for the turn
                self.ends = result
        finally:
            session.append("step/end", StepEnd(turn=self.number, step=self.steps))
        return concluded

    # ------------------------------------------------------------------ the model

    async def query(self, assembly: Assembly) -> tuple[AssistantMessage, Finished | None]:
        """One model request, retried in place if a listener asks: the answer is in the
        log when this returns. Raises :class:`LlmError` when it failed for good."""
        root, agent, session, llm = self.services.root, self.agent, self.session, self.services.llm
        while True:
            await self._check_log_written()
            proposed = seed_config(agent.options, session)
            config = await root.waterfall(
                AGENT_REQUEST, PreRequest(agent, proposed), default=lambda request: request.config
            )
            prepared = llm.prepare_call(config)
            note_renamed(session, llm, prepared.config.provider, prepared.config.model)
            header = EpochHeader(
                config=prepared.config,
                adapter_defaults=prepared.adapter_defaults.to_dict() or None,
                adjusted=adjusted_fields(proposed, config) or None,
                system=assembly.system or None,
                tools=assembly.tools or None,
            )
            logged = session.request_header()
            self._log_request(header, prepared.config, prepared.context_window)
            # What led to this request (the last step's results, the header) is written
            # while the request is built and sent: the write is queued before the
            # request and overlaps the wait for the model, rather than adding to it. A
            # crash in that moment loses at most a result of this step, and a call with
            # effects was synced before it ran (see run_tools), so repair marks its
            # outcome unknown rather than losing track of it.
            self.sink.write_soon()

            # Every part is a validated model already (the history, the header):
            # building the request without validating it all again keeps a long
            # session's steps cheap.
            options = GenerateOptions.model_construct(
                provider=prepared.config.provider,
                model=prepared.config.model,
                messages=tuple(session.derive_messages()),
                reasoning_effort=prepared.config.reasoning_effort,
                system=header.system,
                tools=header.tools,
                temperature=prepared.config.temperature,
                max_tokens=prepared.config.max_tokens,
                stop=prepared.config.stop,
                session_id=session.id,
                signal=self.signal,
            )
            self.cache_watch.before_request(
                session,
                options,
                turn=self.number,
                step=self.steps,
                model=prepared.model,
                pricing=llm.cost,
                logged=logged,
            )
            assembler = BlockAssembler()
            seqs: list[int] = []
            note_retry = functools.partial(
                log_retry, session, uuid.uuid4().hex, self.number, self.steps
            )
            protocol_error: StreamProtocolError | None = None
            async for chunk in llm.stream(options, on_retry=note_retry):
                seqs.append(
                    session.append(
                        "assistant/chunk",
                        AssistantChunk(turn=self.number, step=self.steps, chunk=chunk),
                    ).seq
                )
                try:
                    assembler.push(chunk)
                except StreamProtocolError as error:
                    protocol_error = error
                    break
            if self.signal.aborted or isinstance(assembler.finish, FinishAborted):
                self._keep_partial(assembler, seqs, options)
                raise TurnCancelled
            failure = stream_failure(assembler, protocol_error)
            if failure is not None:
                decision = await root.waterfall(
                    AGENT_REQUEST_ERROR,
                    RequestError(
                        agent,
                        self.number,
                        self.steps,
                        options.provider,
                        failure,
                        prepared.retry_policy,
                        self.signal,
                    ),
                    default=no_recovery,
                )
                if isinstance(decision, Retry):
                    continue  # the failed attempt stays out of history
                partial = self._keep_partial(assembler, seqs, options)
                if partial is not None and self._may_continue(failure):
                    # The connection dropped mid-answer: what arrived stays, and the
                    # next step asks the model to go on from there. Safe to do unasked:
                    # a cut answer's tool calls are never kept, so nothing runs that a
                    # complete answer would not ask for again.
                    self.continuations += 1
                    self.inbox.stage(continuation_note(failure))
                    return partial, None
                raise LlmError(failure)

            message = assembler.message(provider=options.provider, model=options.model)
            session.append(
                "assistant/message",
                AssistantMessageData(
                    turn=self.number, step=self.steps, message=message, usage=assembler.usage
                ),
                source_event_seqs=seqs,
            )
            return message, assembler.finish

    def _log_request(self, header: EpochHeader, config: LlmCallConfig, window: int | None) -> None:
        """A ``request/header`` before every request: in full when new or changed, else a
        reference to the full one; in full at the first request of this run too, so a
        resumed log says what this process sends. ``request/context`` only when the
        route changes."""
        session = self.session
        latest = session.request_header()
        latest_seq = session.request_header_seq
        # Only the loop writes full headers, and this run's first request writes one.
        logged_here = latest_seq is not None and latest_seq >= self.agent.opened_at
        if latest is None or latest != header:
            reason = "initial" if latest is None else ("change" if logged_here else "resume")
            session.append("request/header", RequestHeader(header=header, reason=reason))
        elif not logged_here:
            session.append("request/header", RequestHeader(header=header, reason="resume"))
        else:
            session.append("request/header", RequestHeader(reason="repeat", same_as=latest_seq))
        context = RequestContext(
            provider=config.provider, model=config.model, context_window=window
        )
        if session.request_context() != context:
            session.append("request/context", context)

    def _keep_partial(
        self, assembler: BlockAssembler, seqs: list[int], options: GenerateOptions
    ) -> AssistantMessage | None:
        """What the user saw of a stream that did not finish stays in history (and is
        returned; None when nothing was seen)."""
        partial = assembler.interrupted_blocks()
        if not partial:
            return None
        source = ModelSource(provider=options.provider, model=options.model)
        message = AssistantMessage(content=partial, source=source)
        self.session.append(
            "assistant/message",
            AssistantMessageData(
                turn=self.number,
                step=self.steps,
                message=message,
                usage=assembler.usage,
                interrupted=True,
            ),
            source_event_seqs=seqs,
        )
        return message

    def _may_continue(self, failure: LlmFailure) -> bool:
        """Whether a stream cut by ``failure`` after content is continued unasked."""
        return (
            failure.code in CUT_CODES
            and self.continuations < MAX_CONTINUATIONS
            and not self.signal.aborted
        )

    async def _check_log_written(self) -> None:
        """Before a model request: if the log could not be written (a full disk), try
        once more, and stop the turn if it still fails, rather than go on with work
        that would be lost."""
        if not await self._log_written():
            raise LlmError(self._write_failure())

    async def _log_written(self) -> bool:
        """False when the last write failed and trying again fails too."""
        return self.sink.write_error() is None or await self.sink.flush(sync=False)

    def _write_failure(self) -> LlmFailure:
        message = unstored_message(self.agent.id, self.sink.write_error(), self.sink.stored())
        return LlmFailure(message=message, code=SESSION_WRITE_FAILED)

    # ------------------------------------------------------------------ the prompt

    @property
    def workspace(self) -> tuple[int, int]:
        """A value that changes whenever the working tree may have changed: at each turn
        and after each tool call with effects (``PromptContext.workspace``)."""
        return (self.number, self.effects)

    async def assemble(self) -> Assembly:
        options = self.agent.options
        context = PromptContext(
            agent=self.agent,
            scope=self.agent,
            cwd=self.agent.cwd,
            provider=options.provider,
            model=options.model,
            workspace=self.workspace,
        )
        return await self.services.prompt.assemble(context)

    def _entering(self, assembly: Assembly) -> Callable[[PreStep], Enter]:
        """The default pre-step decision: changed context, then what was claimed, so
        the person's own words are the last thing the model reads. What changed is
        judged when the decision is made, after the listeners before it: one that
        compacted history folded older context entries away, and they are entered
        again in this step."""
        return lambda pre: Enter((*context_messages(self.agent, assembly), *pre.claimed))

    # ------------------------------------------------------------------ the tools

    async def run_tools(self, calls: tuple[ToolCallBlock, ...]) -> bool:
        """Run the calls: consecutive read-only ones side by side (up to 10), any other
        alone, in the model's order; results are logged in that order. True when a tool
        concluded the turn."""
        session, tools, agent = self.session, self.services.tools, self.agent
        concluded = False
        index = 0
        while index < len(calls):
            batch = [calls[index]]
            read_only = tools.concurrency_safe(calls[index], agent)
            if read_only:
                while (
                    index + len(batch) < len(calls)
                    and len(batch) < MAX_PARALLEL_CALLS
                    and tools.concurrency_safe(calls[index + len(batch)], agent)
                ):
                    batch.append(calls[index + len(batch)])
            started = [
                session.append(
                    "tool/call",
                    ToolCall(
                        turn=self.number,
                        step=self.steps,
                        call_id=c.id,
                        name=c.name,
                        arguments=c.arguments,
                    ),
                )
                for c in batch
            ]
            if self.signal.aborted:
                self._answer_unstarted(calls[index:], started=[e.seq for e in started])
                raise TurnCancelled
            if not read_only and not await self.sink.flush():
                # A call with effects is durable before its body runs (read-only calls
                # leave nothing a crash could make ambiguous, so they skip the fsync).
                # If the log cannot be written, the call does not run: its effects
                # would go unrecorded.
                self._answer_unstarted(
                    calls[index:],
                    started=[e.seq for e in started],
                    text="Error: not run, because the session log cannot be written.",
                    code=SESSION_WRITE_FAILED,
                )
                raise LlmError(self._write_failure())
            try:
                outcomes = await asyncio.gather(
                    *(tools.run(c, self._tool_context(c.id), agent) for c in batch)
                )
            finally:
                for call in batch:
                    self._progress.end(call.id)
                if not read_only:
                    self.effects += 1  # the files may have changed, even if the call failed
            for call, event, outcome in zip(batch, started, outcomes, strict=True):
                error = (
                    ToolErrorIdentity(name=call.name, code=outcome.error_code)
                    if outcome.error_code
                    else None
                )
                session.append(
                    "tool/result",
                    ToolResult(
                        turn=self.number,
                        step=self.steps,
                        message=outcome.message,
                        error=error,
                        meta=outcome.output.meta if outcome.output else None,
                    ),
                    source_event_seqs=[event.seq],
                )
                if outcome.output is not None:
                    self.inbox.stage(*outcome.output.additional_contexts)
                    tool = tools.get(call.name, agent)
                    concluded |= bool(tool and tool.concludes_turn and outcome.error_code is None)
            index += len(batch)
        if self.signal.aborted:
            raise TurnCancelled
        return concluded

    def _tool_context(self, call_id: CallId) -> ToolContext:
        spill = self.services.tools.spill
        session_id = self.session.id
        return ToolContext(
            call_id=call_id,
            agent=self.agent,
            cwd=self.agent.cwd,
            signal=self.signal,
            session_id=session_id,
            services=self.agent.ctx,
            spill=(lambda text, label: spill.save(session_id, label, text)) if spill else None,
            progress=self._progress.reporter(call_id),
            allow=self.allow,
            turn=self.number,
            step=max(self.steps, 1),
        )

    def _log_progress(self, call_id: CallId, text: str) -> None:
        # ignorable: a dsh that predates the event skips it and still opens the session
        self.session.append(
            "tool/progress",
            ToolProgress(turn=self.number, step=self.steps, call_id=call_id, message=text),
            ignorable=True,
        )

    def _answer_unstarted(
        self,
        calls: tuple[ToolCallBlock, ...],
        *,
        started: list[int],
        text: str = "Error: cancelled before it ran.",
        code: str = "ABORTED_BEFORE_DISPATCH",
    ) -> None:
        """Calls stopped before they ran (by a cancel, or a log that cannot be written):
        each gets a call (``started`` holds the seqs of those already logged) and an
        error result."""
        session = self.session
        for offset, call in enumerate(calls):
            if offset < len(started):
                seq = started[offset]
            else:
                seq = session.append(
                    "tool/call",
                    ToolCall(
                        turn=self.number,
                        step=self.steps,
                        call_id=call.id,
                        name=call.name,
                        arguments=call.arguments,
                    ),
                ).seq
            session.append(
                "tool/result",
                ToolResult(
                    turn=self.number,
                    step=self.steps,
                    message=tool_result(call.id, text, is_error=True),
                    error=ToolErrorIdentity(name=call.name, code=code),
                ),
                source_event_seqs=[seq],
            )


def context_messages(agent: AgentHandle, assembly: Assembly) -> tuple[UserMessage, ...]:
    """Context entries whose text changed since they were last entered in this session."""
    latest = agent.entered_context()
    out = []
    for name, form, text in assembly.context:
        if latest.get(name) != text:
            out.append(
                UserMessage(
                    content=(TextBlock(text=text),), source=PluginSource(plugin=name, form=form)
                )
            )
    return tuple(out)
