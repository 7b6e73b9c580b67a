"""Approvals, questions and choices as text prompts in plain mode.

Each dialog borrows the input line (:meth:`~dsh.ui.plain_input.Lines.dialog`),
prints what is asked as ordinary lines (so a log or a screen reader has all of it)
and reads the answer: ``y``/``a``/``n``/``f`` for an approval, option numbers or
free text for a question, ``1``/``2``/``3`` or a note for a plan. Ctrl+C on a
dialog's prompt denies (or dismisses) and cancels the running turn; the end of
input answers "unavailable".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Heading, Markdown, MarkdownElement
from rich.segment import Segment
from rich.text import Text

from dsh.control_chars import visible
from dsh.tools.approval import ApprovalDecision, ApprovalRequest
from dsh.tools.plan_review import CHOICES, PlanDecision, PlanOutcome, PlanReview
from dsh.tools.questions import Answer, Question
from dsh.ui.plain_input import Interrupted, Lines
from dsh.ui.render import Indented, diff_text, highlighted
from dsh.ui.trusting import Asker, TrustAnswer, TrustQuestion

MAX_DETAIL_LINES = 40
NUMBERS = re.compile(r"^\d+(?:\s*[,\s]\s*\d+)*$")
PLAN_PROMPT = (
    "Plan: "
    + " / ".join(f"[{number}] {label.lower()}" for number, (_, label, _) in enumerate(CHOICES, 1))
    + " (or type a note to keep planning): "
)


def trust_asker(console: Console, input: Any = None, output: Any = None) -> Asker:
    """The trust question as text, before the runtime (and the main prompt) exists:
    what would change, then ``t``/``n``/``l``. Ctrl+C or the end of input decides
    later."""

    async def ask(question: TrustQuestion) -> TrustAnswer:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.output import DummyOutput

        from dsh.control_chars import visible

        source = (
            visible(str(question.project), one_line=True) if question.project else "This folder"
        )
        console.print(
            Text.assemble(
                ("? ", "bold yellow"),
                (f"{source} would change what dsh does:", "bold"),
            ),
            soft_wrap=True,
        )
        for item in question.ignored:
            console.print(Text(f"  {item.key} = {item.value}"), soft_wrap=True)
            console.print(Text(f"    {item.reason}", style="dim"), soft_wrap=True)
        if question.turned_on:
            console.print(Text("Trusting it also turns on:", style="bold"), soft_wrap=True)
        for thing in question.turned_on:
            console.print(Text(f"  {visible(thing.path)}: {thing.what}"), soft_wrap=True)
        console.print(
            Text(
                "Whoever wrote this repository chose these values. Until you trust "
                f"{visible(str(question.root), one_line=True)}, only settings that make dsh do less apply.",
                style="dim",
            ),
            soft_wrap=True,
        )
        session: PromptSession[str] = PromptSession(
            input=input, output=DummyOutput() if output is not None else None
        )
        while True:
            try:
                reply = await session.prompt_async(
                    "Trust this folder? [t]rust / [n]o, don't trust / [l]ater: "
                )
            except (EOFError, KeyboardInterrupt):
                return "later"
            match reply.strip().lower():
                case "t" | "trust":
                    return "trust"
                case "n" | "no":
                    return "distrust"
                case "l" | "later" | "":
                    return "later"
            console.print(Text("Please answer t, n or l.", style="yellow"))

    return ask


class Dialogs:
    def __init__(self, lines: Lines, console: Console, interrupt: Callable[[], None]) -> None:
        self.lines = lines
        self.console = console
        self.interrupt = interrupt
        """Ctrl+C on a dialog: cancel the running turn."""

    # ------------------------------------------------------------------ approvals

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        async with self.lines.dialog():
            if request.agent_label:
                label = visible(request.agent_label, one_line=True)
                self.console.print(Text.assemble(("subagent: ", "bold"), label), soft_wrap=True)
            self.console.print(
                Text.assemble(
                    ("? ", "bold yellow"),
                    (request.tool_name, "bold"),
                    " asks to run: ",
                    request.summary,
                ),
                soft_wrap=True,
            )
            if request.reason:
                self.console.print(Text(f"  {request.reason}", style="dim"), soft_wrap=True)
            if request.details:
                self.console.print(Indented(approval_details(request)))
            if request.grant:
                covers = request.grant_covers or request.grant
                self.console.print(Text(f"  [a] allows for this session: {covers}", style="dim"))
            always = "[a]lways this session / " if request.grant else ""
            question = f"Allow? [y]es once / {always}[n]o / [f]eedback: "
            while True:
                try:
                    reply = (await self.lines.ask(question)).strip()
                    decision = await self._decide(reply, grantable=request.grant is not None)
                except Interrupted:
                    self.interrupt()
                    return ApprovalDecision(outcome="cancelled")
                except EOFError:
                    return ApprovalDecision(outcome="unavailable")
                if decision is not None:
                    return decision
                choices = "y, a, n or f" if request.grant else "y, n or f"
                self.console.print(Text(f"Please answer {choices}.", style="yellow"))

    async def _decide(self, reply: str, *, grantable: bool) -> ApprovalDecision | None:
        word, _, rest = reply.partition(" ")
        match word.lower():
            case "y" | "yes":
                return ApprovalDecision(outcome="allow_once")
            case "a" | "always" if grantable:
                return ApprovalDecision(outcome="allow_session")
            case "n" | "no":
                return ApprovalDecision(outcome="deny", feedback=rest.strip() or None)
            case "f" | "feedback":
                feedback = rest.strip() or (await self.lines.ask("Tell the model why: ")).strip()
                return ApprovalDecision(outcome="deny", feedback=feedback or None)
        return None

    # ------------------------------------------------------------------ questions

    async def answer(self, questions: Sequence[Question]) -> list[Answer] | None:
        """The person's answers: None when they dismissed the questions."""
        async with self.lines.dialog():
            answers = []
            for question in questions:
                self._show_question(question)
                hint = (
                    ("numbers, comma-separated" if question.multi_select else "a number")
                    + ", or your own answer"
                    if question.options
                    else "your answer"
                )
                while True:
                    try:
                        reply = (await self.lines.ask(f"Answer ({hint}): ")).strip()
                    except Interrupted:
                        self.interrupt()
                        return None
                    except EOFError:
                        return None
                    answer = parse_answer(question, reply)
                    if answer is not None:
                        answers.append(answer)
                        break
                    self.console.print(Text(f"Please type {hint}.", style="yellow"))
            return answers

    def _show_question(self, question: Question) -> None:
        title = Text("? ", style="bold yellow")
        if question.header:
            title.append(f"{question.header}: ", style="bold")
        title.append(question.question)
        self.console.print(title, soft_wrap=True)
        for number, option in enumerate(question.options, 1):
            line = Text(f"  {number}. {option.label}")
            if option.description:
                line.append(f" - {option.description}", style="dim")
            self.console.print(line, soft_wrap=True)

    # ------------------------------------------------------------------ plans

    async def review_plan(self, review: PlanReview) -> PlanDecision:
        """The plan in full, then the three answers; any other text sends the plan
        back with that text as the note."""
        async with self.lines.dialog():
            if review.agent_label:
                label = visible(review.agent_label, one_line=True)
                self.console.print(Text.assemble(("subagent: ", "bold"), label), soft_wrap=True)
            self.console.print(
                Text.assemble(("? ", "bold yellow"), ("The plan is ready:", "bold")),
                soft_wrap=True,
            )
            self.console.print(Trimmed(Indented(plan_markdown(review.plan))))
            while True:
                try:
                    reply = await self.lines.ask(PLAN_PROMPT)
                except Interrupted:
                    self.interrupt()
                    return PlanDecision(outcome="cancelled")
                except EOFError:
                    return PlanDecision(outcome="unavailable")
                decision = parse_plan_reply(reply)
                if decision is not None:
                    return decision
                self.console.print(Text("Please answer 1, 2 or 3, or type a note.", style="yellow"))

    # ------------------------------------------------------------------ choices

    async def choose(self, title: str, items: Sequence[str]) -> int | None:
        """Pick one of ``items`` by number: its index, or None (empty line, Ctrl+C)."""
        async with self.lines.dialog():
            self.console.print(Text(title, style="bold"))
            for number, item in enumerate(items, 1):
                self.console.print(Text(f"  {number}. {item}"), soft_wrap=True)
            while True:
                try:
                    reply = await self.lines.ask(f"Number (1-{len(items)}, empty to cancel): ")
                except (Interrupted, EOFError):
                    return None
                reply = reply.strip()
                if not reply:
                    return None
                if reply.isdigit() and 1 <= int(reply) <= len(items):
                    return int(reply) - 1
                self.console.print(Text(f"Please type a number from 1 to {len(items)}."))


def parse_answer(question: Question, reply: str) -> Answer | None:
    """Numbers pick options (several only for a multi-select question); any other
    text is the person's own answer. None for an empty reply or bad numbers."""
    if not reply:
        return None
    if question.options and NUMBERS.match(reply):
        numbers = [int(n) for n in re.split(r"[,\s]+", reply)]
        if not all(1 <= n <= len(question.options) for n in numbers):
            return None
        if len(numbers) > 1 and not question.multi_select:
            return None
        labels = tuple(dict.fromkeys(question.options[n - 1].label for n in numbers))
        return Answer(id=question.id, selected=labels)
    return Answer(id=question.id, custom=reply)


def _plan_words() -> dict[str, PlanOutcome]:
    words: dict[str, PlanOutcome] = {}
    for number, (outcome, label, _) in enumerate(CHOICES, 1):
        for word in (str(number), outcome, outcome.replace("-", " "), label.lower()):
            words[word] = outcome
    return words


PLAN_WORDS = _plan_words()
"""What picks each answer to a plan: its number, its name, its label."""


def parse_plan_reply(reply: str) -> PlanDecision | None:
    """A number (or an answer's name or label) picks it; any other text is the note of
    "keep planning", kept as typed. None for an empty reply (asked again: an Enter
    pressed too soon approves nothing)."""
    note = reply.strip()
    if not note:
        return None
    outcome = PLAN_WORDS.get(note.lower().rstrip("."))
    if outcome is not None:
        return PlanDecision(outcome=outcome)
    return PlanDecision(outcome="keep-planning", note=note)


class _LeftHeading(Heading):
    LEVEL_ALIGN: ClassVar[dict[str, Any]] = dict.fromkeys(Heading.LEVEL_ALIGN, "left")


class LineMarkdown(Markdown):
    """Markdown for lines read top to bottom (a log, a screen reader): every heading
    at the left edge, where the text it heads starts."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "heading_open": _LeftHeading,
    }


class Trimmed:
    """A renderable's lines without the blanks rich pads them with to the full width:
    a log gets no trailing blanks."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            while line and not line[-1].control and not line[-1].text.rstrip():
                line.pop()
            if line and not line[-1].control:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(), last.style)
            yield from line
            yield Segment.line()


def plan_markdown(plan: str) -> Markdown:
    """The model's plan as Markdown, every control character shown as a picture; links
    are printed with their address (the person sees where one would lead)."""
    return LineMarkdown(visible(plan), hyperlinks=False)


def approval_details(request: ApprovalRequest) -> RenderableType:
    """A diff coloured as one, a command as shell code, anything else as text."""
    details = request.details or ""
    lines = details.rstrip("\n").splitlines()
    cut = len(lines) - MAX_DETAIL_LINES
    if cut > 0:
        lines = lines[:MAX_DETAIL_LINES]
    if any(line.startswith(("@@", "+++ ", "--- ")) for line in lines):
        body: RenderableType = diff_text(lines)
    elif request.risk == "exec":
        body = highlighted("\n".join(lines), "bash")
    else:
        body = Text("\n".join(lines))
    if cut > 0:
        return Group(body, Text(f"… {cut} more lines", style="dim italic"))
    return body
