"""The turn and step loop.

A turn answers one prompt. It runs steps until the model stops asking for tools and
no steering is waiting: each step enters its messages (the prompt, steering, fresh
context), asks the model, and runs the tools it called. Every fact goes into the
session log as it happens; the closing events (``step/end``, ``turn/end``) are
always written, whatever stops the turn, so the log stays sound.

Reading order: :func:`run_turn`, then :func:`run_step`, then :func:`run_tools`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh.agent.interception import (
    PRE_STEP,
    REQUEST,
    REQUEST_ERROR,
    TURN_STOPPING,
    Enter,
    PreStep,
    Reject,
    RequestError,
    Retry,
)
from dsh.agent.signal import TurnCancelled, TurnSignal
from dsh.llm import (
    AssistantMessage,
    BlockAssembler,
    FinishAborted,
    FinishError,
    FinishMaxTokens,
    GenerateOptions,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    ModelSource,
    PluginSource,
    RetryNotice,
    StreamProtocolError,
    TextBlock,
    ToolCallBlock,
    UserMessage,
    tool_result,
)
from dsh.prompt import Assembly
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    EpochHeader,
    RequestContext,
    RequestHeader,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolErrorIdentity,
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
from dsh.session.events import CancelByUser, LlmRetry

if TYPE_CHECKING:
    from dsh.agent.agent import Agent

_log = logging.getLogger("dsh.agent")


async def run_turn(
    agent: Agent, prompt: UserMessage, extra: tuple[UserMessage, ...], trigger: TurnTrigger
) -> TurnEndReason:
    session = agent.session
    number = session.last_turn + 1
    signal = agent.begin_turn()
    session.append("turn/start", TurnStart(turn=number, trigger=trigger))
    step = 0
    ends: TurnEndReason | None = None
    concluded = False
    first = (prompt, *extra)
    try:
        while True:
            steering, injected = agent.inbox.claim_step()
            claimed = (*(first if step == 0 else ()), *(i.message for i in steering), *injected)
            steering_ids = {item.message.id for item in steering}
            assembly = await agent.assemble()
            decision = await agent.root.waterfall(
                PRE_STEP,
                PreStep(agent, claimed, number, step + 1, signal),
                default=_entering(agent, assembly),
                subject=agent,
            )
            if isinstance(decision, Reject):
                ends = TurnBlocked()
                break
            if ends is not None and not decision.messages:
                break
            if step == 0 and not decision.messages:
                ends = TurnCompleted()
                break
            limit = agent.options.max_steps
            if limit is not None and step >= limit:
                ends = TurnMaxSteps(limit=limit)
                break
            step += 1
            session.append("step/start", StepStart(turn=number, step=step))
            try:
                for message in decision.messages:
                    kind = "steering/message" if message.id in steering_ids else "user/message"
                    session.append(kind, message)
                result, concluded = await run_step(agent, number, step, assembly, signal)
                if not isinstance(ends, TurnMaxTokens):  # max-tokens sticks for the turn
                    ends = result
            finally:
                session.append("step/end", StepEnd(turn=number, step=step))
            if concluded:
                break  # a tool ended the turn; anything left waits outside it
            if ends is not None and not agent.inbox.has_next_step:
                # Listeners may still steer the turn on; after them, nothing joins it.
                await agent.root.serial(TURN_STOPPING, agent, number, signal, subject=agent)
                agent.settling = True
                if not agent.inbox.has_next_step:
                    break
                agent.settling = False
    except TurnCancelled:
        ends = TurnAborted(reason=signal.cause or CancelByUser())
    except LlmError as error:
        ends = TurnFailed(error=error.failure)
    except Exception as error:
        _log.exception("turn %d of %s failed", number, session.id)
        agent.report_error(error)
        if signal.aborted:
            ends = TurnAborted(reason=signal.cause or CancelByUser())
        else:
            ends = TurnFailed(
                error=LlmFailure(message=f"{type(error).__name__}: {error}", code="UNKNOWN")
            )
    finally:
        reason = ends or TurnCompleted()
        session.append("turn/end", TurnEnd(turn=number, reason=reason))
        agent.end_turn()  # leftover context is appended, leftover steering queued
        # Written before the agent goes idle; the fsync follows in the background.
        await agent.flush(sync=False)
    return reason


def _entering(agent: Agent, assembly: Assembly) -> Callable[[PreStep], Enter]:
    """The default pre-step decision: changed context, then what was claimed, so the
    person's own words are the last thing the model reads. What changed is judged when
    the decision is made, after the listeners before it: one that compacted history
    folded older context entries away, and they are entered again in this step."""
    return lambda pre: Enter((*context_messages(agent, assembly), *pre.claimed))


def context_messages(agent: Agent, assembly: Assembly) -> tuple[UserMessage, ...]:
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


async def run_step(
    agent: Agent, turn: int, step: int, assembly: Assembly, signal: TurnSignal
) -> tuple[TurnEndReason | None, bool]:
    """One model request (retried in place if a listener asks), then its tools.
    Returns how the turn ends (None: it continues with another step), and whether a
    tool concluded it."""
    session = agent.session
    while True:
        await _check_log_written(agent)
        config = await agent.root.waterfall(
            REQUEST, agent, agent.seed_config(), default=lambda a, c: c, subject=agent
        )
        prepared = agent.llm.prepare_call(config)
        header = EpochHeader(
            config=prepared.config,
            adapter_defaults=prepared.adapter_defaults.to_dict() or None,
            system=assembly.system or None,
            tools=assembly.tools or None,
        )
        log_request(agent, header, prepared.config, prepared.context_window)
        # What led to this request (the last step's results, the header) is written
        # while the request is built and sent: the write is queued before the request
        # and overlaps the wait for the model, rather than adding to it. A crash in
        # that moment loses at most a result of this step, and a call with effects
        # was synced before it ran (see run_tools), so repair marks its outcome
        # unknown rather than losing track of it.
        agent.write_soon()

        # Every part is a validated model already (the history, the header): building
        # the request without validating it all again keeps a long session's steps cheap.
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
            signal=signal,
        )
        assembler = BlockAssembler()
        seqs: list[int] = []
        note_retry = functools.partial(_log_retry, session, uuid.uuid4().hex, turn, step)
        protocol_error: StreamProtocolError | None = None
        async for chunk in agent.llm.stream(options, on_retry=note_retry):
            seqs.append(
                session.append(
                    "assistant/chunk", AssistantChunk(turn=turn, step=step, chunk=chunk)
                ).seq
            )
            try:
                assembler.push(chunk)
            except StreamProtocolError as error:
                protocol_error = error
                break
        if signal.aborted or isinstance(assembler.finish, FinishAborted):
            _keep_partial(agent, turn, step, assembler, seqs, options)
            raise TurnCancelled
        failure = None
        if protocol_error is not None:
            failure = LlmFailure(
                message=f"the model stream broke the protocol: {protocol_error}",
                code="MALFORMED_RESPONSE",
            )
        elif isinstance(assembler.finish, FinishError):
            failure = assembler.finish.failure
        elif assembler.finish is None:
            failure = LlmFailure(
                message="the model stream ended without finishing", code="STREAM_CLOSED"
            )
        if failure is not None:
            decision = await agent.root.waterfall(
                REQUEST_ERROR,
                RequestError(
                    agent, turn, step, options.provider, failure, prepared.retry_policy, signal
                ),
                default=_no_recovery,
                subject=agent,
            )
            if isinstance(decision, Retry):
                continue  # the failed attempt stays out of history
            _keep_partial(agent, turn, step, assembler, seqs, options)
            raise LlmError(failure)

        message = assembler.message(provider=options.provider, model=options.model)
        session.append(
            "assistant/message",
            AssistantMessageData(turn=turn, step=step, message=message, usage=assembler.usage),
            source_event_seqs=seqs,
        )
        if isinstance(assembler.finish, FinishMaxTokens):
            return TurnMaxTokens(), False
        if not message.tool_calls:
            return TurnCompleted(), False
        concluded = await run_tools(agent, turn, step, message.tool_calls, signal)
        return (TurnCompleted(), True) if concluded else (None, False)


def _no_recovery(error: RequestError) -> Retry | None:
    """The default of ``agent/request-error``: the failure ends the turn."""
    return None


def _log_retry(session: Session, retry_id: str, turn: int, step: int, notice: RetryNotice) -> None:
    session.append(
        "llm/retry",
        LlmRetry(
            retry_id=retry_id,
            turn=turn,
            step=step,
            provider=notice.provider,
            retry=notice.retry,
            max_retries=notice.max_retries,
            delay_ms=notice.delay_ms,
            failure=notice.failure,
        ),
    )


def _keep_partial(
    agent: Agent,
    turn: int,
    step: int,
    assembler: BlockAssembler,
    seqs: list[int],
    options: GenerateOptions,
) -> None:
    """What the user saw of a stream that did not finish stays in history."""
    partial = assembler.interrupted_blocks()
    if not partial:
        return
    source = ModelSource(provider=options.provider, model=options.model)
    agent.session.append(
        "assistant/message",
        AssistantMessageData(
            turn=turn,
            step=step,
            message=AssistantMessage(content=partial, source=source),
            usage=assembler.usage,
            interrupted=True,
        ),
        source_event_seqs=seqs,
    )


def log_request(
    agent: Agent, header: EpochHeader, config: LlmCallConfig, window: int | None
) -> None:
    """A ``request/header`` before every request: in full when new or changed, else a
    reference to the full one. ``request/context`` only when the route changes."""
    session = agent.session
    latest = session.request_header()
    latest_seq = session.request_header_seq
    if latest is None or latest != header:
        reason = "initial" if latest is None else ("change" if agent.headers_logged else "resume")
        session.append("request/header", RequestHeader(header=header, reason=reason))
    elif not agent.headers_logged:
        session.append("request/header", RequestHeader(header=header, reason="resume"))
    else:
        assert latest_seq is not None
        session.append("request/header", RequestHeader(reason="repeat", same_as=latest_seq))
    agent.headers_logged = True
    context = RequestContext(provider=config.provider, model=config.model, context_window=window)
    if session.request_context() != context:
        session.append("request/context", context)


MAX_PARALLEL_CALLS = 10


async def run_tools(
    agent: Agent, turn: int, step: int, calls: tuple[ToolCallBlock, ...], signal: TurnSignal
) -> bool:
    """Run the calls: consecutive read-only ones side by side (up to 10), any other
    alone, in the model's order; results are logged in that order. True when a tool
    concluded the turn."""
    session = agent.session
    concluded = False
    index = 0
    while index < len(calls):
        batch = [calls[index]]
        read_only = agent.tools.concurrency_safe(calls[index], agent)
        if read_only:
            while (
                index + len(batch) < len(calls)
                and len(batch) < MAX_PARALLEL_CALLS
                and agent.tools.concurrency_safe(calls[index + len(batch)], agent)
            ):
                batch.append(calls[index + len(batch)])
        started = [
            session.append(
                "tool/call",
                ToolCall(turn=turn, step=step, call_id=c.id, name=c.name, arguments=c.arguments),
            )
            for c in batch
        ]
        if signal.aborted:
            _answer_unstarted(agent, turn, step, calls[index:], started=[e.seq for e in started])
            raise TurnCancelled
        if not read_only and not await agent.flush():
            # A call with effects is durable before its body runs (read-only calls
            # leave nothing a crash could make ambiguous, so they skip the fsync). If
            # the log cannot be written, the call does not run: its effects would go
            # unrecorded.
            _answer_unstarted(
                agent,
                turn,
                step,
                calls[index:],
                started=[e.seq for e in started],
                text="Error: not run, because the session log cannot be written.",
                code="SESSION_WRITE_FAILED",
            )
            raise LlmError(_write_failure(agent))
        try:
            outcomes = await asyncio.gather(
                *(agent.tools.run(c, agent.tool_context(c.id, signal), agent) for c in batch)
            )
        finally:
            if not read_only:
                agent.effects += 1  # the files may have changed, even if the call failed
        for call, event, outcome in zip(batch, started, outcomes, strict=True):
            error = (
                ToolErrorIdentity(name=call.name, code=outcome.error_code)
                if outcome.error_code
                else None
            )
            session.append(
                "tool/result",
                ToolResult(
                    turn=turn,
                    step=step,
                    message=outcome.message,
                    error=error,
                    meta=outcome.output.meta if outcome.output else None,
                ),
                source_event_seqs=[event.seq],
            )
            if outcome.output is not None:
                agent.inbox.injected.extend(outcome.output.additional_contexts)
                tool = agent.tools.get(call.name, agent)
                concluded |= bool(tool and tool.concludes_turn and outcome.error_code is None)
        index += len(batch)
    if signal.aborted:
        raise TurnCancelled
    return concluded


def _answer_unstarted(
    agent: Agent,
    turn: int,
    step: int,
    calls: tuple[ToolCallBlock, ...],
    *,
    started: list[int],
    text: str = "Error: cancelled before it ran.",
    code: str = "ABORTED_BEFORE_DISPATCH",
) -> None:
    """Calls stopped before they ran (by a cancel, or a log that cannot be written):
    each gets a call (``started`` holds the seqs of those already logged) and an error
    result."""
    session = agent.session
    for offset, call in enumerate(calls):
        if offset < len(started):
            seq = started[offset]
        else:
            seq = session.append(
                "tool/call",
                ToolCall(
                    turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments
                ),
            ).seq
        session.append(
            "tool/result",
            ToolResult(
                turn=turn,
                step=step,
                message=tool_result(call.id, text, is_error=True),
                error=ToolErrorIdentity(name=call.name, code=code),
            ),
            source_event_seqs=[seq],
        )


async def _check_log_written(agent: Agent) -> None:
    """Before a model request: if the log could not be written (a full disk), try once
    more, and stop the turn if it still fails, rather than go on with work that would
    be lost."""
    if agent.write_error() is not None and not await agent.flush(sync=False):
        raise LlmError(_write_failure(agent))


def _write_failure(agent: Agent) -> LlmFailure:
    error = agent.write_error()
    reason = (getattr(error, "strerror", None) or str(error)) if error is not None else "unknown"
    return LlmFailure(
        message=(
            f"the session log cannot be written ({reason}), so dsh stopped; what it holds "
            f"so far is safe: free the space and resume the session {agent.id}"
        ),
        code="SESSION_WRITE_FAILED",
    )
