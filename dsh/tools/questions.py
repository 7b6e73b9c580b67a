"""The question seam: a tool asks the person, a UI answers.

Answering is the ``question/ask`` hook (:data:`dsh.hooks.QUESTION_ASK`): a UI
registers an answerer with ``ctx.get(QUESTIONS).set_answerer(...)``, the newest
answering first; a tool that asks the person calls :meth:`QuestionService.ask`. With
no answerer (as in headless mode), or for a subagent, asking is an error the model is
told about.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from dsh.agent_handle import AgentHandle
from dsh.kernel import Context, Disposer, First, ServiceKey
from dsh.wire import Frozen


class QuestionOption(Frozen):
    label: str
    description: str | None = None


class Question(Frozen):
    id: str
    question: str
    header: str | None = None
    options: tuple[QuestionOption, ...] = ()
    multi_select: bool = False


class Answer(Frozen):
    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None


@dataclass(frozen=True)
class Dismissed:
    """A ``question/ask`` listener's reply when the person closed the questions
    unanswered (a listener's None means the question is not its to answer)."""


class NoAnswererError(Exception):
    """Nobody is there to answer (headless mode)."""


Answerer = Callable[[Sequence[Question], AgentHandle | None], Awaitable[Sequence[Answer] | None]]
"""Given the questions and the asking agent: the answers, or None if dismissed."""


class QuestionService:
    """Asks through the ``question/ask`` hook, dispatched on ``ctx``'s kernel."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def bind_context(self, ctx: Context) -> BoundQuestions:
        return BoundQuestions(self, ctx)

    def add_answerer(self, answerer: Answerer) -> Disposer:
        return _answering(self._ctx, answerer)

    async def ask(
        self, questions: Sequence[Question], agent: AgentHandle | None
    ) -> Sequence[Answer] | None:
        """The person's answers; None when they dismissed the questions. A subagent
        cannot ask: the person talks to the agent that delegated to it."""
        if agent is not None and agent.session.header.origin == "subagent":
            raise NoAnswererError(
                "you run as a subagent: the user cannot be asked questions from here"
            )
        answer = await self._ctx.serial(QUESTION_ASK, questions, agent)
        if answer is None:
            raise NoAnswererError("no user is available to answer questions (dsh runs headless)")
        return None if isinstance(answer, Dismissed) else answer


class BoundQuestions:
    def __init__(self, service: QuestionService, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    def set_answerer(self, answerer: Answerer) -> Disposer:
        """Answer questions (before any answerer registered earlier) until this
        context is disposed."""
        return _answering(self._ctx, answerer)

    async def ask(
        self, questions: Sequence[Question], agent: AgentHandle | None
    ) -> Sequence[Answer] | None:
        return await self._service.ask(questions, agent)


def _answering(ctx: Context, answerer: Answerer) -> Disposer:
    async def answer(
        questions: Sequence[Question], agent: AgentHandle | None
    ) -> Sequence[Answer] | Dismissed:
        answers = await answerer(questions, agent)
        return Dismissed() if answers is None else answers

    return ctx.on(QUESTION_ASK, answer, prepend=True)


QUESTION_ASK: First[[Sequence[Question], AgentHandle | None], Sequence[Answer] | Dismissed] = First(
    "question/ask",
    subject=lambda questions, agent: agent,
    doc="a tool asks the person questions: the newest answerer (a UI) answers or says "
    "they were dismissed; none at all is an error the model is told (headless)",
)


QUESTIONS: ServiceKey[BoundQuestions] = ServiceKey("questions")
"""Questions for the person (``ask``), and the answerers (``set_answerer``)."""
