"""The question seam: a tool asks the person, a UI answers.

A UI registers an answerer with ``ctx.questions.set_answerer(...)``; a tool that asks
the person calls :meth:`QuestionService.ask`. With no answerer (as in
headless mode) asking is an error the model is told about.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from dsh.agent_handle import AgentHandle
from dsh.kernel import Context, Disposer
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


class NoAnswererError(Exception):
    """Nobody is there to answer (headless mode)."""


Answerer = Callable[[Sequence[Question], AgentHandle | None], Awaitable[Sequence[Answer] | None]]
"""Given the questions and the asking agent: the answers, or None if dismissed."""


class QuestionService:
    def __init__(self) -> None:
        self._answerers: list[Answerer] = []

    def bind_context(self, ctx: Context) -> BoundQuestions:
        return BoundQuestions(self, ctx)

    def add_answerer(self, answerer: Answerer) -> Callable[[], None]:
        self._answerers.append(answerer)

        def remove() -> None:
            if answerer in self._answerers:
                self._answerers.remove(answerer)

        return remove

    async def ask(
        self, questions: Sequence[Question], agent: AgentHandle | None
    ) -> Sequence[Answer] | None:
        if not self._answerers:
            raise NoAnswererError("no user is available to answer questions (headless mode)")
        return await self._answerers[-1](questions, agent)


class BoundQuestions:
    def __init__(self, service: QuestionService, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    def set_answerer(self, answerer: Answerer) -> Disposer:
        return self._ctx.effect(lambda: self._service.add_answerer(answerer))

    async def ask(
        self, questions: Sequence[Question], agent: AgentHandle | None
    ) -> Sequence[Answer] | None:
        return await self._service.ask(questions, agent)
