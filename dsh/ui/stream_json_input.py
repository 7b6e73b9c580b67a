"""Stream-json's input: the commands a program driving ``dsh -p`` writes on stdin
(prompts, follow-ups, steering, cancels), and its answers to what dsh asks (approvals,
questions, plans), matched to the request each answers by its id.

The request lines dsh writes for them, and what an unanswered request comes to when
stdin closes, are here too; docs/headless.md describes the protocol.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

from dsh.llm import user_text
from dsh.session.payloads import CancelByUser
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.ui.session_controller import SlashOutcome
from dsh.wire import dumps

__all__ = ["PLAN_ANSWERS", "Control", "follow_commands"]

PLAN_ANSWERS = ("accept-edits", "default", "keep-planning")
"""What a ``plan`` line on stdin may answer (``plan-request``'s outcomes)."""


class Control:
    """Approvals, questions and plans answered by the program driving dsh over stdin."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.session_id: str | None = None
        """The session the requests are for, once it is open."""
        self.pending: dict[str, tuple[str, asyncio.Future[Any]]] = {}
        self.closed = False
        """Stdin closed: nobody is left to answer what is asked from now on."""

    def _ask(self, kind: str, request_id: str, body: dict[str, Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.closed:
            # Asked after stdin closed (the turn went on): nothing could answer it,
            # and waiting would hold dsh open for ever.
            future.set_result(_unanswered(kind))
            return future
        self.pending[request_id] = (kind, future)
        line = {"type": kind, "requestId": request_id, "sessionId": self.session_id, **body}
        self.write(dumps(line) + "\n")
        return future

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        body = request.to_dict()
        body.pop("id")
        return await self._ask("approval-request", request.id, body)  # type: ignore[no-any-return]

    async def answer(self, questions: Sequence[Question]) -> list[Answer] | None:
        request_id = uuid.uuid4().hex
        body = {"questions": [q.to_dict() for q in questions]}
        return await self._ask("question-request", request_id, body)  # type: ignore[no-any-return]

    async def review(self, review: PlanReview) -> PlanDecision:
        body: dict[str, Any] = {
            "sessionId": review.session_id,
            "plan": review.plan,
            "callId": review.call_id,
        }
        if review.agent_label is not None:
            body["agentLabel"] = review.agent_label
        return await self._ask("plan-request", review.id, body)  # type: ignore[no-any-return]

    def resolve(self, request_id: str, kind: str, value: Any) -> bool:
        waiting = self.pending.get(request_id)
        if waiting is None or waiting[0] != kind or waiting[1].done():
            return False
        del self.pending[request_id]
        waiting[1].set_result(value)
        return True

    def close(self) -> None:
        """Stdin closed: nothing pending, or asked later, can be answered any more. An
        approval is then unavailable (a denial), a plan unreviewed (as with nobody to
        review it), and a question counts as dismissed."""
        self.closed = True
        for kind, future in self.pending.values():
            if not future.done():
                future.set_result(_unanswered(kind))
        self.pending.clear()


def _unanswered(kind: str) -> Any:
    """What a request nobody can answer any more comes to."""
    if kind == "approval-request":
        return ApprovalDecision(outcome="unavailable")
    if kind == "plan-request":
        return PlanDecision(outcome="unavailable")
    return None


async def follow_commands(
    agent: Any,
    err: TextIO,
    control: Control,
    run_slash: Callable[[str], Awaitable[SlashOutcome]],
) -> None:
    """Follow stdin commands until it closes. A prompt is sent as every front end
    sends one (``run_slash``): a slash command runs, an unknown ``/word`` is refused."""
    # A thread reads stdin, since it may be a file (``< commands.jsonl``), which the
    # event loop's pipe transports refuse, as well as a pipe or a terminal.
    number = 0
    while line := await asyncio.to_thread(sys.stdin.buffer.readline):
        number += 1
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            command = json.loads(text)
            kind = command["type"]
        except (ValueError, KeyError, TypeError):
            err.write(f"dsh: stdin line {number} is not a command object; skipped\n")
            continue
        match kind:
            case "prompt" | "followup":
                text = str(command.get("text", ""))
                if await run_slash(text.strip()) == "not-a-command":
                    agent.followup(user_text(text))
            case "steer":
                agent.steer(user_text(str(command.get("text", ""))))
            case "inject":
                agent.inject(user_text(str(command.get("text", ""))))
            case "cancel":
                keep = command.get("keepInbox", command.get("keep_inbox", False))
                agent.cancel(CancelByUser(), keep_inbox=bool(keep))
            case "approval":
                try:
                    decision = ApprovalDecision.model_validate(
                        {k: v for k, v in command.items() if k in ("outcome", "feedback", "rule")}
                    )
                except ValueError as error:
                    err.write(f"dsh: stdin line {number}: bad approval: {error}\n")
                    continue
                if not control.resolve(_request_id(command), "approval-request", decision):
                    err.write(f"dsh: stdin line {number}: no pending approval with that id\n")
            case "answer":
                try:
                    answers = [Answer.model_validate(a) for a in command.get("answers", [])]
                except ValueError as error:
                    err.write(f"dsh: stdin line {number}: bad answer: {error}\n")
                    continue
                if not control.resolve(_request_id(command), "question-request", answers):
                    err.write(f"dsh: stdin line {number}: no pending question with that id\n")
            case "plan":
                outcome = command.get("outcome")
                note = command.get("note")
                if outcome not in PLAN_ANSWERS or not isinstance(note, str | None):
                    err.write(
                        f"dsh: stdin line {number}: bad plan answer: the outcome is one of "
                        f"{', '.join(PLAN_ANSWERS)}, the note a string\n"
                    )
                    continue
                plan_decision = PlanDecision(outcome=outcome, note=note or None)
                if not control.resolve(_request_id(command), "plan-request", plan_decision):
                    err.write(f"dsh: stdin line {number}: no pending plan with that id\n")
            case _:
                err.write(f"dsh: stdin line {number}: unknown command {kind!r}; skipped\n")


def _request_id(command: dict[str, Any]) -> str:
    """The request a stdin answer is for: ``requestId`` (``request_id`` is read too,
    as dsh wrote it before every key became camelCase)."""
    return str(command.get("requestId", command.get("request_id")))
