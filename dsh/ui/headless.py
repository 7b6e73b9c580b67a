"""Headless mode, ``dsh -p``: run a prompt to the end of its turn and print the outcome.

Output formats (see docs/headless.md): ``text`` streams the assistant's text to stdout
as it arrives (tool activity goes to stderr); ``json`` prints one result record at the
end (status, ``sessionId``, ``numTurns``, ``durationMs``, ``usage``, ``costUsd``);
``stream-json`` prints every session event as one JSON line once it is stored (the
session's writer hands over each stored batch, in order: a printed event survives
dsh being killed, and its ``seq`` is never given to another), each with the
``sessionId``, and the same result record last. Keys are camelCase throughout.

With ``--input-format stream-json``, stdin carries commands, one JSON object a line:
``{"type": "prompt" | "followup" | "steer" | "inject", "text": "..."}``,
``{"type": "cancel"}``, and the answers to what dsh asks on stdout (as
``{"type": "approval-request", "requestId": ...}`` and ``{"type": "question-request",
...}`` lines): ``{"type": "approval", "requestId": ..., "outcome": "allow_once" |
"allow_session" | "deny" | "deny_session", "feedback": ...}``, ``{"type": "answer", "requestId": ...,
"answers": [{"id": ..., "selected": [...], "custom": ...}]}`` and, for a plan the
model presents in plan mode (a ``plan-request`` line), ``{"type": "plan", "requestId":
..., "outcome": "accept-edits" | "default" | "keep-planning", "note": ...}``
(``request_id`` is read too). dsh runs until stdin closes and the agent is idle; what
is asked after that is answered as nobody can (denied, dismissed, unreviewed).
Without anyone to review it, a plan is the run's result (:func:`unreviewed_plan`). Without stdin commands nobody can approve: what needs approval is
denied unless ``--permission-mode`` allows it, and the model is told why.

Exit status: 0 when the turn completed (or stopped at the output limit) and every
event of the run is stored, 1 with a one-line reason on stderr when it failed or its
session log could not be written (then the result names no session if none of it was
stored), 130 when it was cancelled (SIGINT), 143 when it was ended with SIGTERM (the
turn cancelled and the session closed as at any end, its SessionEnd hooks run; a
second SIGTERM ends it at once). Cancelling writes the turn's closing events, so the
session can be resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from dsh.agent.hooks import SESSION_TITLE_NOW
from dsh.commands import parse_command
from dsh.control_chars import VisibleStream, is_terminal
from dsh.llm import user_text
from dsh.session import (
    AssistantMessageData,
    PlanProposed,
    PlanReviewed,
    SessionEvent,
    TurnAborted,
    TurnBlocked,
    TurnCompleted,
    TurnEnd,
    TurnFailed,
    TurnMaxSteps,
    TurnMaxTokens,
    session_spend,
)
from dsh.session.payloads import CancelByUser, CommandDone, InboxDiscarded
from dsh.session.writer import unstored_message
from dsh.settings import Settings
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.ui.headless_printer import Printer
from dsh.ui.opening import BusyChoice
from dsh.ui.session_controller import SessionController, StartFailed
from dsh.ui.stream_json_input import Control, follow_commands
from dsh.ui.trusting import TrustAnswer, TrustQuestion, ignored_lines
from dsh.ui.user_interface import SessionChoice

if TYPE_CHECKING:
    from dsh.agent import AgentHandle
    from dsh.frontend import Kind
    from dsh.session import SessionBusyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_CLOSED_OUTPUT = 141  # 128 + SIGPIPE, what a shell reports for a closed pipe
EXIT_TERMINATED = 143  # 128 + SIGTERM
RESTORING = frozenset({"undo", "rewind"})
"""Commands whose JSON result says what they restored, not what a turn answered."""


@dataclass(frozen=True, kw_only=True)
class HeadlessRequest(SessionChoice):
    """``dsh -p``: the session choices, the formats, and what only a headless run has."""

    output_format: str = "text"
    input_format: str = "text"
    max_steps: int | None = None
    title: bool = False


def final_text(events: list[SessionEvent]) -> str:
    """The text of the last assistant message that made no tool call."""
    for event in reversed(events):
        data = event.data
        if isinstance(data, AssistantMessageData) and not data.message.tool_calls:
            return data.message.text()
        if isinstance(data, AssistantMessageData):
            return ""
    return ""


def proposed_plan(events: Sequence[SessionEvent]) -> str | None:
    """The last plan the model presented in ``events``."""
    plans = [e.data.plan for e in events if isinstance(e.data, PlanProposed)]
    return plans[-1] if plans else None


def unreviewed_plan(events: Sequence[SessionEvent]) -> str | None:
    """The plan that is the run's result: the last one presented, when nobody could
    review it (``dsh -p`` without a driver). What the model said after it (it is told to
    end its turn, and a model says a line doing so) does not replace it."""
    plans = {e.data.review_id: e.data.plan for e in events if isinstance(e.data, PlanProposed)}
    for event in reversed(events):
        data = event.data
        if isinstance(data, PlanReviewed):
            return plans.get(data.review_id) if data.outcome == "unavailable" else None
    return None


def outcome(reason: Any, blocked: str | None) -> tuple[int, str | None]:
    """Exit status and the one-line reason for a turn's end."""
    if blocked is not None:
        return EXIT_FAILED, f"the prompt was blocked: {blocked}"
    match reason:
        case TurnCompleted() | None:
            return EXIT_OK, None
        case TurnMaxTokens():
            return EXIT_OK, "note: the answer stopped at the output token limit"
        case TurnFailed(error=failure):
            return EXIT_FAILED, failure.message
        case TurnMaxSteps(limit=limit):
            return EXIT_FAILED, f"stopped after {limit} steps (the --max-steps limit)"
        case TurnAborted():
            return EXIT_CANCELLED, "cancelled"
        case TurnBlocked():
            return EXIT_FAILED, "the turn was blocked by a hook"
        case _:
            return EXIT_FAILED, f"the turn ended: {getattr(reason, 'kind', reason)}"


async def run(
    request: HeadlessRequest, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    started = time.monotonic()
    # Notes are for a person; so is text on a terminal. Text into a pipe or a file
    # stays exactly what the model wrote, and JSON escapes what a terminal obeys.
    err = VisibleStream.around(err)
    if request.output_format == "text" and is_terminal(out):
        out = VisibleStream.around(out)
    ui = HeadlessUI(request, out, err)
    options = {"max_steps": request.max_steps} if request.max_steps is not None else {}
    controller = SessionController(ui, request, options=options)
    loop = asyncio.get_running_loop()
    running = asyncio.current_task()
    assert running is not None
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        loop.remove_signal_handler(signal.SIGTERM)  # a second one kills at once
        running.cancel()

    # SIGTERM ends the run as its end does (the session closed, its hooks awaited)
    # rather than killing the process mid-write.
    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        try:
            # Nobody is here to ask: what an untrusted folder would widen is ignored.
            await controller.start()
            await controller.open_first()
        except StartFailed as failed:
            err.write(f"{failed}\n")
            return EXIT_FAILED
        # The sandbox's probe (and its warning) beside the first request, not before
        # it: the first command waits for it anyway.
        probe = asyncio.create_task(controller.sandbox_status(), name="sandbox-probe")
        try:
            return await _run(controller, ui, request, started)
        finally:
            with contextlib.suppress(Exception):
                await probe
    except asyncio.CancelledError:
        if not terminated:
            raise
        running.uncancel()
        err.write("dsh: terminated\n")
        return EXIT_TERMINATED
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await controller.close()


async def _run(
    controller: SessionController, ui: HeadlessUI, request: HeadlessRequest, started: float
) -> int:
    agent = controller.agent
    runtime = controller.runtime
    assert agent is not None
    assert runtime is not None
    printer = ui.printer
    first_live = len(agent.session.events)
    command_failed = False
    restoring: str | None = None
    """``/undo`` or ``/rewind`` given as the prompt: its JSON result says what it did."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, agent.cancel, CancelByUser())
    try:
        if ui.control is not None:
            # What a command says goes to stderr: stdout holds only records.
            ui.said_aside = request.output_format != "text"
            await follow_commands(agent, ui.err, ui.control, controller.run_slash)
            ui.control.close()
        else:
            if not request.prompt:
                ui.err.write("dsh: no prompt given (pass one, or pipe it on stdin)\n")
                return EXIT_USAGE
            parsed = parse_command(request.prompt)
            named = parsed[0] if parsed and parsed[0] in RESTORING else None
            # In a JSON format stdout holds only records (the restore's, or the turn's
            # a command such as /plan or /init starts): what a command says for a
            # person goes to stderr.
            ui.said_aside = request.output_format != "text"
            # The send policy every front end has: an unknown /word is refused (said on
            # stderr, exit 1), never sent to the model as text.
            sent = await controller.run_slash(request.prompt)
            if sent == "ran":
                restoring = named
            elif sent == "not-a-command":
                agent.followup(user_text(request.prompt))
            command_failed = ui.failed or printer.command_failed
        await agent.when_idle()
        if request.title and not await runtime.root.serial(SESSION_TITLE_NOW, agent):
            ui.err.write("dsh: --title: no plugin titles sessions (is one disabled?)\n")
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        stored = await runtime.sessions.flush(agent.session)

    events = list(agent.session.events[first_live:])
    ends = [e.data for e in events if isinstance(e.data, TurnEnd)]
    blocked = next(
        (
            e.data.detail or "no reason given"
            for e in events
            if isinstance(e.data, InboxDiscarded) and e.data.reason == "blocked"
        ),
        None,
    )
    code, reason = outcome(ends[-1].reason if ends else None, blocked if not ends else None)
    if command_failed and code == EXIT_OK:
        code = EXIT_FAILED
    sessions = runtime.sessions
    kept = sessions.stored(agent.session)
    if not stored:
        # Whatever the turn said, what it did is not all stored: that is the outcome.
        code = EXIT_FAILED if code == EXIT_OK else code
        reason = unstored_message(agent.id, sessions.write_error(agent.session), kept)
    printer.end_line()
    plan = unreviewed_plan(events)
    if plan is not None and request.output_format == "text":
        printer.write(plan if plan.endswith("\n") else plan + "\n")  # the run's answer
    if printer.closed:
        return EXIT_CLOSED_OUTPUT  # the reader left: say nothing more, as `yes | head` does
    if request.output_format in ("json", "stream-json") and restoring is not None:
        printer.json_line(_restore_result(agent, events, restoring, code, reason, started))
    elif request.output_format in ("json", "stream-json"):
        result = _result(runtime, agent, events, code, reason, started, len(ends))
        if not kept:
            result["sessionId"] = None  # no stored session has that id
        printer.json_line(result)
    if reason is not None:
        printer.note(f"dsh: {reason}\n" if not reason.startswith("note:") else f"dsh {reason}\n")
    return code


def _result(
    runtime: Any,
    agent: Any,
    events: list[SessionEvent],
    code: int,
    reason: str | None,
    started: float,
    turns: int,
) -> dict[str, Any]:
    spent = session_spend(events, runtime.llm.cost)
    plan = unreviewed_plan(events)
    result = {  # camelCase, as every record dsh writes (the log's, approval requests)
        "type": "result",
        "subtype": "success" if code == EXIT_OK else "error",
        "isError": code != EXIT_OK,
        "result": plan if plan is not None else final_text(events),
        "error": None if code == EXIT_OK else reason,
        "sessionId": agent.id,
        "numTurns": turns,
        "durationMs": round((time.monotonic() - started) * 1000),
        "usage": spent.usage.to_dict() if spent.usage is not None else None,
        "costUsd": spent.cost,
    }
    proposed = proposed_plan(events)
    if proposed is not None:
        result["plan"] = proposed  # whatever became of it: the last plan of the run
    return result


def _restore_result(
    agent: AgentHandle,
    events: list[SessionEvent],
    command: str,
    code: int,
    reason: str | None,
    started: float,
) -> dict[str, Any]:
    """``dsh -p "/undo"`` or ``"/rewind N"``'s JSON result, from what the run logged:
    the files its restore put back, the ones changed by hand it left alone, and the
    rewound turn's prompt (when the conversation went back too)."""
    from dsh.session import HistoryRewound, RestoreDone, turns

    restored: list[str] = []
    conflicts: list[str] = []
    prompt: str | None = None
    failure = reason
    for event in events:
        data = event.data
        if isinstance(data, RestoreDone):
            restored.extend(data.applied)
            conflicts.extend(data.conflicts)
            if data.error is not None:
                failure = data.error
        elif isinstance(data, HistoryRewound):
            prompt = next(
                (info.prompt for info in turns(agent.session) if info.turn == data.turn), None
            )
        elif isinstance(data, CommandDone) and data.kind == "error":
            failure = data.text
    return {
        "type": "result",
        "subtype": command,
        "isError": code != EXIT_OK,
        "error": None if code == EXIT_OK else failure,
        "restored": restored,
        "conflicts": conflicts,
        "prompt": prompt,
        "sessionId": agent.id,
        "durationMs": round((time.monotonic() - started) * 1000),
    }


class HeadlessUI:
    """``dsh -p`` as a front end: the session printed in the chosen format, notes and
    errors on stderr. The program driving dsh over stdin answers approvals and
    questions when ``--input-format stream-json`` is given; otherwise nobody does, and
    nobody is asked anything else either."""

    kind: Kind = "headless"
    one_session = True
    attended = False

    def __init__(self, request: HeadlessRequest, out: TextIO, err: TextIO) -> None:
        self.err = err
        self.agent: AgentHandle | None = None
        self.printer = Printer(request.output_format, out, err, on_closed=self._cancel)
        self.control = (
            Control(self.printer.write) if request.input_format == "stream-json" else None
        )
        self.failed = False
        """A slash command given as the prompt failed."""
        self.said_aside = False
        """What a command says goes to stderr: its JSON record on stdout says it."""
        self._unsubscribe: list[Callable[[], None]] = []

    @property
    def answers(self) -> bool:
        return self.control is not None

    def _cancel(self) -> None:
        if self.agent is not None:
            self.agent.cancel(CancelByUser())

    def show(self, text: str, *, level: str = "info") -> None:
        """What a slash command given as the prompt (``dsh -p "/cost" --resume ID``)
        says: its output on stdout, a failure on stderr."""
        if level == "error":
            self.failed = True
            self.printer.note(f"dsh: {text}\n")
        elif self.said_aside:
            self.printer.note(f"{text}\n")
        else:
            self.printer.write(text + "\n")

    def show_ignored(self, settings: Settings) -> None:
        for line in ignored_lines(settings):
            self.printer.note(f"dsh: {line}\n")

    def show_warning(self, text: str) -> None:
        self.printer.note(f"dsh: {text}\n")

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        from dsh.session.store import SESSIONS

        self.agent = agent
        self.printer.session_id = agent.id
        if self.control is not None:
            self.control.session_id = agent.id
        # From what this run logged, including what resuming logged before the agent
        # existed (grants that no longer hold): as it is logged, and once it is stored.
        since = agent.opened_at
        sessions = agent.ctx.get(SESSIONS)
        self.printer.records(agent.session.events[since : sessions.stored(agent.session)], since)
        self._unsubscribe = [
            agent.session.subscribe(self.printer, from_seq=since),
            sessions.follow(
                agent.session, written=lambda batch: self.printer.records(batch, since)
            ),
        ]

    def detach(self) -> None:
        self.agent = None
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    async def show_read_only(self, events: Sequence[SessionEvent]) -> None:
        for event in events:  # read from storage: stored
            self.printer(event)
            self.printer.record(event)

    async def quit(self) -> None:
        pass  # the run ends with its turn

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        return "later"

    async def set_up(self, home: Path, settings: Settings) -> bool | None:
        return None  # the first request says what is missing

    async def ask_busy(self, busy: SessionBusyError) -> BusyChoice | None:
        return None  # --fork-session and --wait are the ways out, chosen up front

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        assert self.control is not None  # wired only when someone answers
        if not await self._stored(request.session_id):
            return ApprovalDecision(
                outcome="unavailable", feedback="not asked: the session log cannot be written"
            )
        return await self.control.approve(request)

    async def ask_questions(self, questions: Sequence[Question]) -> list[Answer] | None:
        assert self.control is not None
        if self.agent is not None and not await self._stored(self.agent.id):
            return None
        return await self.control.answer(questions)

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        assert self.control is not None
        if not await self._stored(review.session_id):
            return PlanDecision(
                outcome="unavailable", note="not asked: the session log cannot be written"
            )
        return await self.control.review(review)

    async def _stored(self, session_id: str) -> bool:
        """Store what the session logged so far, before a request line names it: the
        printed ``sessionId`` exists, and the events before the request are printed
        before it."""
        from dsh.agent.service import AGENTS

        if self.agent is None:
            return True
        asking = self.agent.ctx.get(AGENTS).get(session_id)
        return asking is None or await asking.flush(sync=False)

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        return None  # nobody to ask

    async def pick_session(self) -> str | None:
        return None
