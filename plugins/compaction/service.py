"""The ``compaction`` service: replaces the older history of a session with a summary.

One compaction, whatever started it, is bracketed in the log::

    compaction/start{turn, focus}
    compaction/summary{summary, shadowed seqs, tokens, the call, trims}
    user/message{replace: first..last shadowed node}   (the summary, in tags)
    compaction/end{turn}

or, when it fails (the model errs, the stream breaks, it times out, it is cancelled),
``compaction/start`` then ``compaction/end{error}`` and nothing else: history is left
as it was. These start one:

- ``agent/pre-step``: before a step's request, when the context would fill more than
  ``threshold`` of the model's window (the latest usage report plus an estimate of
  what was added since);
- ``agent/pre-step`` too (with ``auto``): when the next request and even
  ``min_answer_tokens`` of answer would not fit the model's window (the ceiling of
  prompt plus ``max_tokens``), since that request could only be refused;
- ``agent/request-error``: a request the provider refused as too long is compacted and
  sent again (once per step);
- ``/compact [focus]``, between turns (as agent maintenance, so no turn starts
  meanwhile).

``agent/request`` lowers a request's ``max_tokens`` to what fits under the window
beside the prompt (``compaction/ceiling`` says so in the transcript).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dsh.agent import AgentHandle, PreRequest, PreStep, RequestError, Retry
from dsh.hooks import HISTORY_SUMMARISE
from dsh.kernel import Context, ServiceKey
from dsh.llm import (
    BlockAssembler,
    FinishAborted,
    FinishError,
    GenerateOptions,
    LlmCallConfig,
    LlmError,
    LlmService,
    Message,
    StreamProtocolError,
    TokenUsage,
    message_tokens,
    messages_tokens,
)
from dsh.session import ReplaceOp, Session, SessionEvent, TurnEnd, TurnStart
from dsh_plugins.compaction.config import Config
from dsh_plugins.compaction.events import (
    CEILING,
    END,
    START,
    SUMMARY,
    CeilingFit,
    CompactionEnd,
    CompactionStart,
    CompactionSummary,
)
from dsh_plugins.compaction.meter import Measure, measure
from dsh_plugins.compaction.request import (
    Call,
    build_request,
    fit,
    session_todos,
    summary_message,
)
from dsh_plugins.compaction.selection import Mode, choose_cut

_log = logging.getLogger("dsh.plugins.compaction")

SERVICE: ServiceKey[CompactionService] = ServiceKey("compaction")
MIN_USEFUL = 0.02
"""Automatic compaction does not bother for less than this share of the window."""
HEADROOM = 0.95
"""The share of the summariser's window its request may fill, with its answer."""
OVERFLOW = "CONTEXT_WINDOW_EXCEEDED"
CEILING_MARGIN = 0.02
"""The share of the window left free beside the estimated prompt and the output cap:
the estimate is calibrated by the last usage report, not exact."""


class CompactionError(Exception):
    """A compaction did not happen; the message says why (``compaction/end`` too)."""


class CompactionBusy(CompactionError):
    """Another compaction, or a turn, is running."""


class CompactionRefused(CompactionError):
    """A ``history/summarise`` listener (a user's hook) refused it; nothing was logged
    here: the listener says so itself."""


@dataclass(frozen=True)
class CompactionResult:
    compaction_id: str
    summary: str
    shadowed_seqs: tuple[int, ...]
    shadowed_tokens: int
    """The estimated size of what was replaced."""
    context_tokens: int
    """The estimated size of the context afterwards."""
    context_window: int | None
    message_seq: int
    """The seq of the summary message."""
    trimmed_seqs: tuple[int, ...] = ()
    omitted_seqs: tuple[int, ...] = ()


def open_compaction(events: Sequence[SessionEvent]) -> str | None:
    """The id of a compaction started in this process's life of the log and not ended
    (a crashed one, before the latest ``session/end-seed``, no longer counts)."""
    ended: set[str] = set()
    for event in reversed(events):
        match event.data:
            case CompactionEnd(compaction_id=compaction_id):
                ended.add(compaction_id)
            case CompactionStart(compaction_id=compaction_id) if compaction_id not in ended:
                return compaction_id
        if event.type == "session/end-seed":
            return None
    return None


class CompactionService:
    def __init__(self, ctx: Context, config: Config) -> None:
        self._ctx = ctx
        self.config = config
        self._busy: set[str] = set()
        self._failed_turn: dict[str, int] = {}
        """Per session, a turn whose automatic compaction failed: not retried in it."""
        self._overflow_tried: set[tuple[str, int, int]] = set()
        self._ceiling_said: dict[str, tuple[int | None, int]] = {}
        """Per session: the turn and cap of the last lowered cap it was told of."""
        self._sizes: weakref.WeakKeyDictionary[Session, dict[int, int]] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------------ measuring

    def context_window(self, agent: AgentHandle) -> int | None:
        """The window of the model the agent talks to."""
        options = agent.options
        return _window(agent.llm, options.provider, options.model)

    def measure(self, agent: AgentHandle) -> Measure:
        session = agent.session
        sizes = self._sizes.setdefault(session, {})
        return measure(session.events, session.surface_nodes, session.request_header(), sizes)

    def pressure(self, agent: AgentHandle, pending: Sequence[Message] = ()) -> int:
        """The tokens the next request would hold, with ``pending`` messages added."""
        measured = self.measure(agent)
        return measured.total + measured.scaled(messages_tokens(pending))

    # ------------------------------------------------------------------ compacting

    async def compact_now(
        self, agent: AgentHandle, focus: str | None = None
    ) -> CompactionResult | None:
        """Compact between turns (``/compact``): no turn starts until it is over and the
        log is written. None when there is nothing to compact."""

        async def task() -> CompactionResult | None:
            try:
                return await self.compact(agent, mode="manual", focus=focus)
            finally:
                await agent.flush()

        if agent.status != "idle":
            raise CompactionBusy("a turn is running: /compact once it has ended")
        try:
            return await agent.run_maintenance(task)
        except RuntimeError as error:
            if "idle" in str(error):
                raise CompactionBusy("a turn is running: /compact once it has ended") from None
            raise

    async def compact(
        self,
        agent: AgentHandle,
        *,
        mode: Mode,
        focus: str | None = None,
        turn: int | None = None,
        signal: asyncio.Event | None = None,
        ceiling: CeilingFit | None = None,
    ) -> CompactionResult | None:
        """Replace the older history with a summary. None when there is nothing worth
        compacting (nothing is logged then); raises :class:`CompactionError`, after
        logging why, when the compaction fails. ``ceiling``, when the compaction is
        for want of room under the model's ceiling, is logged just before it starts."""
        session = agent.session
        key = str(session.id)
        if key in self._busy or open_compaction(session.events) is not None:
            raise CompactionBusy("a compaction is running already")
        self._busy.add(key)
        try:
            return await self._compact(agent, mode, focus, turn, signal, ceiling)
        finally:
            self._busy.discard(key)

    async def _compact(
        self,
        agent: AgentHandle,
        mode: Mode,
        focus: str | None,
        turn: int | None,
        signal: asyncio.Event | None,
        ceiling: CeilingFit | None = None,
    ) -> CompactionResult | None:
        session = agent.session
        window = self.context_window(agent)
        measured = self.measure(agent)
        keep = int(self.config.keep * window) if window else sys.maxsize
        sizes = [measured.scaled(size) for size in measured.estimates]
        cut = choose_cut(session.events, measured.nodes, sizes, keep=keep, mode=mode)
        if cut is None:
            return None
        if mode == "pressure" and window and cut.head_tokens < MIN_USEFUL * window:
            return None
        trigger = "manual" if mode == "manual" else "auto"
        try:
            refusals = await self._ctx.parallel(HISTORY_SUMMARISE, agent, trigger, focus or "")
        except Exception:  # a listener that fails has no say
            _log.warning("session %s: a history/summarise listener failed", agent.id, exc_info=True)
            refusals = []
        refused = next((reason for reason in refusals if reason), None)
        if refused is not None:
            raise CompactionRefused(refused)
        compaction_id = uuid.uuid4().hex
        if ceiling is not None:
            session.append(CEILING.name, ceiling)
        session.append(
            START.name, CompactionStart(compaction_id=compaction_id, turn=turn, focus=focus)
        )

        def fail(reason: str) -> None:
            session.append(
                END.name,
                CompactionEnd(compaction_id=compaction_id, turn=turn, error=reason),
            )

        header = session.request_header()
        todos = session_todos(session)
        try:
            call, summary_window = self._call(agent, header)
            budget = None
            if summary_window is not None:
                budget = int(summary_window * HEADROOM) - (call.max_tokens or 0)
            trim = fit(
                header,
                session.events,
                cut.head,
                budget=budget,
                ratio=measured.ratio,
                focus=focus,
                todos=todos,
            )
            if trim is None:
                raise CompactionError("the history does not fit a summary request, even cut short")
            options = build_request(
                header,
                session.events,
                cut.head,
                trim,
                call=call,
                focus=focus,
                todos=todos,
                session_id=session.id,
                signal=signal,
            )
            summary, usage = await self._summarise(agent.llm, options)
            if tuple(session.surface_nodes[: len(cut.head)]) != cut.head:
                raise CompactionError("the history changed while it was summarised")
        except asyncio.CancelledError:
            fail("cancelled")
            raise
        except CompactionError as error:
            fail(str(error))
            raise
        except Exception as error:
            reason = _reason(error)
            fail(reason)
            raise CompactionError(reason) from error

        message = summary_message(compaction_id, summary, todos)
        tail = measured.estimates[len(cut.head) :]
        context = measured.scaled(measured.header + message_tokens(message) + sum(tail))
        try:
            session.append(
                SUMMARY.name,
                CompactionSummary(
                    compaction_id=compaction_id,
                    summary=summary,
                    shadowed_range=(cut.head[0], cut.head[-1]),
                    shadowed_seqs=cut.head,
                    shadowed_token_count=cut.head_tokens,
                    provider=call.provider,
                    model=call.model,
                    usage=usage,
                    reasoning_effort=call.reasoning_effort,
                    max_tokens=call.max_tokens,
                    trimmed_seqs=trim.trimmed,
                    omitted_seqs=trim.omitted,
                    context_tokens=context,
                ),
            )
            placed = session.append(
                "user/message",
                message,
                surface_op=ReplaceOp(start=cut.head[0], end=cut.head[-1]),
                source_event_seqs=cut.head,
            )
        except Exception as error:
            reason = f"the summary could not be put in place: {_reason(error)}"
            fail(reason)
            raise CompactionError(reason) from error
        session.append(END.name, CompactionEnd(compaction_id=compaction_id, turn=turn))
        return CompactionResult(
            compaction_id=compaction_id,
            summary=summary,
            shadowed_seqs=cut.head,
            shadowed_tokens=cut.head_tokens,
            context_tokens=context,
            context_window=window,
            message_seq=placed.seq,
            trimmed_seqs=trim.trimmed,
            omitted_seqs=trim.omitted,
        )

    def _call(self, agent: AgentHandle, header: Any) -> tuple[Call, int | None]:
        """The summariser's route, effort and output cap, and its window."""
        config = self.config
        provider = config.provider or agent.options.provider
        model = config.model or agent.options.model
        effort = config.reasoning_effort
        if effort is None and header is not None:
            logged = header.config
            if (logged.provider, logged.model) == (provider, model):
                effort = logged.reasoning_effort
        resolved = agent.llm.resolve(provider, model)
        window = resolved.context_window
        cap = config.max_tokens
        if resolved.default_max_tokens:
            cap = min(cap, resolved.default_max_tokens)
        if window:
            cap = max(1, min(cap, window // 4))
        prepared = agent.llm.prepare_call(
            LlmCallConfig(provider=provider, model=model, reasoning_effort=effort, max_tokens=cap)
        )
        chosen = prepared.config
        return Call(
            chosen.provider, chosen.model, chosen.reasoning_effort, chosen.max_tokens
        ), window

    async def _summarise(
        self, llm: LlmService, options: GenerateOptions
    ) -> tuple[str, TokenUsage | None]:
        """The model's summary (its text only) and the call's usage."""
        assembler = BlockAssembler()
        chunks = llm.stream(options)
        timeout = self.config.timeout_s
        try:
            async with asyncio.timeout(timeout):
                async for chunk in chunks:
                    assembler.push(chunk)
        except TimeoutError:
            raise CompactionError(f"the summary took longer than {timeout:g} s") from None
        except StreamProtocolError as error:
            raise CompactionError(f"the summary stream broke the protocol: {error}") from None
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        finish = assembler.finish
        if isinstance(finish, FinishAborted):
            raise CompactionError("cancelled")
        if isinstance(finish, FinishError):
            raise CompactionError(finish.failure.message)
        if finish is None or assembler.failed:
            raise CompactionError("the summary stream ended without finishing")
        text = assembler.message(provider=options.provider, model=options.model).text().strip()
        if not text:
            raise CompactionError("the model wrote no summary")
        return text, assembler.usage

    # ------------------------------------------------------------------ triggers

    async def on_pre_step(self, pre: PreStep, next_: Callable[[], Awaitable[Any]]) -> Any:
        """``agent/pre-step``: compact first when the next request would be too full, or
        would leave no room for an answer under the model's ceiling."""
        agent = pre.agent
        short = self._short_of_room(agent, pre)
        if short is not None or self._due(agent, pre):
            try:
                await self.compact(
                    agent, mode="pressure", turn=pre.turn, signal=pre.signal, ceiling=short
                )
            except CompactionBusy:
                pass
            except CompactionError as error:
                self._failed_turn[str(agent.session.id)] = pre.turn
                _log.warning("session %s: automatic compaction failed: %s", agent.session.id, error)
        return await next_()

    def _due(self, agent: AgentHandle, pre: PreStep) -> bool:
        if not self.config.auto or pre.signal.is_set():
            return False
        if self._failed_turn.get(str(agent.session.id)) == pre.turn:
            return False
        window = self.context_window(agent)
        if not window:
            return False
        return self.pressure(agent, pre.claimed) >= self.config.threshold * window

    def _short_of_room(self, agent: AgentHandle, pre: PreStep) -> CeilingFit | None:
        """What to log when the next request, with even ``min_answer_tokens`` of answer,
        would not fit the window; None when it would (or nothing can be done)."""
        if not self.config.auto or pre.signal.is_set():
            return None
        if self._failed_turn.get(str(agent.session.id)) == pre.turn:
            return None
        window = self.context_window(agent)
        if not window:
            return None
        options = agent.options
        asked = options.max_tokens or _output_cap(agent.llm, options.provider, options.model)
        # A small window's floor is a tenth of it, so that it never compacts long
        # before the threshold would.
        floor = min(self.config.min_answer_tokens, asked or window, window // 10)
        context = self.pressure(agent, pre.claimed)
        if context + floor + int(window * CEILING_MARGIN) <= window:
            return None
        return CeilingFit(
            turn=pre.turn, context_tokens=context, ceiling=window, max_tokens=asked or floor
        )

    async def on_request(
        self, pre: PreRequest, next_: Callable[[], Awaitable[LlmCallConfig]]
    ) -> LlmCallConfig:
        """``agent/request``: a request whose prompt and output cap would pass the
        model's window (which counts both) asks for a smaller cap, and says so."""
        config = await next_()
        agent = pre.agent
        window = _window(agent.llm, config.provider, config.model)
        asked = config.max_tokens or _output_cap(agent.llm, config.provider, config.model)
        if not window or asked is None:
            return config
        context = self.pressure(agent)
        room = window - context - int(window * CEILING_MARGIN)
        if asked <= room or room <= 0:
            # Past the window by the prompt alone: no cap helps, and the provider's
            # refusal is compacted by on_request_error.
            return config
        turn = _open_turn(agent.session)
        said = self._ceiling_said.get(str(agent.id))
        # Said once a turn (and again when the room shrinks by half): a small window
        # lowers every request, and a notice on each would bury the conversation.
        if said is None or said[0] != turn or room < said[1] // 2:
            self._ceiling_said[str(agent.id)] = (turn, room)
            agent.session.append(
                CEILING.name,
                CeilingFit(
                    turn=turn,
                    context_tokens=context,
                    ceiling=window,
                    max_tokens=asked,
                    lowered_to=room,
                ),
            )
        return config.model_copy(update={"max_tokens": room})

    async def on_request_error(
        self, error: RequestError, next_: Callable[[], Awaitable[Any]]
    ) -> Any:
        """``agent/request-error``: a request too long for the model is compacted and
        sent again, once per step, if the history did shrink."""
        agent = error.agent
        if error.failure.code != OVERFLOW:
            return await next_()
        key = (str(agent.session.id), error.turn, error.step)
        if key in self._overflow_tried or error.signal.is_set():
            return await next_()
        self._overflow_tried.add(key)
        generation = agent.session.replace_generation
        try:
            await self.compact(agent, mode="overflow", turn=error.turn, signal=error.signal)
        except CompactionError as failure:
            _log.warning("session %s: compaction after overflow failed: %s", agent.id, failure)
        if agent.session.replace_generation != generation:
            return Retry()
        return await next_()

    def forget(self, agent: AgentHandle) -> None:
        """``agent/disposed``: drop what was kept about the agent's session."""
        key = str(agent.id)
        self._failed_turn.pop(key, None)
        self._ceiling_said.pop(key, None)
        self._overflow_tried = {k for k in self._overflow_tried if k[0] != key}


def _window(llm: LlmService, provider: str, model: str) -> int | None:
    try:
        return llm.resolve(provider, model).context_window
    except Exception:  # an unknown route: the request itself will say so
        return None


def _output_cap(llm: LlmService, provider: str, model: str) -> int | None:
    """The output cap a request to the model gets when it sets none."""
    try:
        return llm.resolve(provider, model).default_max_tokens
    except Exception:  # an unknown route: the request itself will say so
        return None


def _open_turn(session: Session) -> int | None:
    """The number of the turn the session is in, if one is open."""
    for event in reversed(session.events):
        if isinstance(event.data, TurnStart):
            return event.data.turn
        if isinstance(event.data, TurnEnd):
            return None
    return None


def _reason(error: BaseException) -> str:
    if isinstance(error, LlmError):
        return error.failure.message
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
