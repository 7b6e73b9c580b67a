"""``ask_user_question``: the model asks the person one or more questions.

The questions go to whichever UI answers questions (the ``questions`` service); the
answers come back as JSON: ``{"answers": [{"id", "selected": [labels], "custom"?}]}``.
With nobody to ask (headless), the model is told so and should go on without.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, model_validator

from dsh.kernel import Context, Plugin
from dsh.services import QUESTIONS, TOOLS
from dsh.tools import (
    Action,
    CallResult,
    Presentation,
    TextView,
    ToolContext,
    ToolDefinition,
    ToolError,
)
from dsh.tools.questions import NoAnswererError, Question, QuestionOption

DESCRIPTION = (
    "Ask the user questions when you cannot go on without their choice (a design "
    "decision, an ambiguous requirement). Offer options when there are clear choices; "
    "the user can always answer in their own words. Do not ask what you can find out "
    "by reading the code."
)


# Asking is itself the user's turn to speak: it needs no approval, but it is not
# read-only, so two calls never open two dialogs at once.
NEVER_NEEDS_APPROVAL = Action(risk="read", summary="ask the user")


class Option(BaseModel):
    label: str = Field(description="a short answer the user can pick")
    description: str | None = Field(default=None, description="what choosing it means")


class QuestionArguments(BaseModel):
    id: str = Field(description="a short id to match the answer")
    question: str
    header: str | None = Field(default=None, description="a few words shown as a title")
    options: list[Option] = Field(default_factory=list)
    multi_select: bool = False


class AskArguments(BaseModel):
    questions: list[QuestionArguments]

    @model_validator(mode="after")
    def _some(self) -> AskArguments:
        if not self.questions:
            raise ValueError("ask at least one question")
        ids = [q.id for q in self.questions]
        if len(set(ids)) != len(ids):
            raise ValueError("question ids must be distinct")
        return self


async def ask_user_question(arguments: AskArguments, context: ToolContext) -> str:
    questions = [
        Question(
            id=q.id,
            question=q.question,
            header=q.header,
            options=tuple(
                QuestionOption(label=o.label, description=o.description) for o in q.options
            ),
            multi_select=q.multi_select,
        )
        for q in arguments.questions
    ]
    service = context.services.get(QUESTIONS, None) if context.services is not None else None
    if service is None:
        raise ToolError("no user is available to answer questions", "NO_PROVIDER")
    try:
        answers = await service.ask(questions, context.agent)
    except NoAnswererError as error:
        raise ToolError(
            f"{error}; decide yourself, say what you assumed, and go on", "NO_PROVIDER"
        ) from None
    if answers is None:
        raise ToolError("the user dismissed the questions without answering", "ASK_ABORTED")
    return json.dumps({"answers": [a.to_dict() for a in answers]}, ensure_ascii=False)


def present_call(arguments: dict[str, Any]) -> Presentation:
    """The questions as the person sees them, not their JSON."""
    return TextView(title="Asking you", body=_questions(arguments) or None)


def present_result(arguments: dict[str, Any], result: CallResult) -> Presentation:
    """Each question with the answer given, or why there was none."""
    if result.is_error:
        return TextView(title="Asked you: no answer", body=result.text or None)
    try:
        answers = {a.get("id"): a for a in json.loads(result.text).get("answers", [])}
    except (ValueError, AttributeError):
        return TextView(title="Asked you", body=result.text or None)
    lines = []
    for question in arguments.get("questions", []):
        if not isinstance(question, dict):
            continue
        answer = answers.get(question.get("id"), {})
        given = [*answer.get("selected", []), *([answer["custom"]] if answer.get("custom") else [])]
        lines.append(f"{question.get('question', '?')} → {', '.join(map(str, given)) or '-'}")
    return TextView(title="Asked you", body="\n".join(lines) or None)


def _questions(arguments: dict[str, Any]) -> str:
    lines = []
    for question in arguments.get("questions", []):
        if not isinstance(question, dict):
            continue
        lines.append(str(question.get("question", "?")))
        for option in question.get("options", []):
            if isinstance(option, dict):
                lines.append(f"  · {option.get('label', '?')}")
    return "\n".join(lines)


def apply(ctx: Context, config: object) -> None:
    ctx.get(TOOLS).register(
        "ask_user_question",
        ToolDefinition(
            name="ask_user_question",
            description=DESCRIPTION,
            arguments=AskArguments,
            execute=ask_user_question,
            kind="other",
            describe=lambda arguments, context: NEVER_NEEDS_APPROVAL,
            present_call=present_call,
            present_result=present_result,
        ),
    )


plugin = Plugin(
    name="ask-user", inject=(TOOLS,), apply=apply, description="the ask_user_question tool"
)
